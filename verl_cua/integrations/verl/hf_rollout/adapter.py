"""`HFServerAdapter`: the `hf` rollout's `BaseRollout`, living in each trainer worker; pushes weights to `HFServer`.

For CPU runs and tests only; production rollouts use vLLM/SGLang. verl builds it from
`_ROLLOUT_REGISTRY[("hf", "async")]` in every trainer rank. Every rank drains the weight iterator (FSDP's
`full_tensor()` is a collective); only a replica's rank 0 sends CPU copies, in buckets, to its server actor.
LoRA (model.lora.merge=False) arrives as vLLM gets it: base weights once (`base_sync_done=False`, targeted layers
named `.base_layer.`) as a plain load, then each sync's adapter tensors plus `peft_config`, sent whole in one call
that replaces the server's adapter (vLLM's remove_lora + add_lora of a `TensorLoRARequest`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterable
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.utils import ensure_async_iterator

from verl_cua.integrations.verl.hf_rollout.replica import server_actor_name

logger = logging.getLogger(__name__)

DEFAULT_BUCKET_MB = 256


class HFServerAdapter(BaseRollout):
    """Trainer-side client of an `hf` rollout server: lifecycle forwarding and weight sync over Ray."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **kwargs: Any):
        super().__init__(config, model_config, device_mesh)
        self.server_handle: ray.actor.ActorHandle | None = None
        world_size = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank // world_size if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world_size
        self.sleep_level = 1  # read by verl's LoRA path; nothing to free on CPU

    @property
    def has_server(self) -> bool:
        """Whether this rank talks to the server (rank 0 of its replica)."""
        return self.rollout_rank == 0

    def _server(self) -> ray.actor.ActorHandle:
        """The replica's server actor, looked up by name on first use (it starts after the trainer)."""
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_actor_name(self.replica_rank))
        return self.server_handle

    @property
    def bucket_bytes(self) -> int:
        """Weight-sync bucket size: `checkpoint_engine.update_weights_bucket_megabytes`, default 256 MB."""
        engine = getattr(self.config, "checkpoint_engine", None)
        megabytes = getattr(engine, "update_weights_bucket_megabytes", None) or DEFAULT_BUCKET_MB
        return int(megabytes) << 20

    async def resume(self, tags: list[str]) -> None:
        """Forward to the server's `wake_up` (a no-op there: CPU weights stay resident)."""
        if self.config.free_cache_engine and self.has_server:
            await self._server().wake_up.remote(tags=tags)

    async def release(self) -> None:
        """Forward to the server's `sleep` (a no-op there)."""
        if self.config.free_cache_engine and self.has_server:
            await self._server().sleep.remote()

    async def update_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator[tuple[str, torch.Tensor]],
        wire_format: str = "named_tensors",
        **kwargs: Any,
    ) -> int:
        """Drain `weights` on every rank; a replica's rank 0 loads them into its server. Returns tensors sent."""
        if wire_format != "named_tensors":
            raise NotImplementedError(f"hf rollout supports wire_format='named_tensors' only, got {wire_format!r}")
        peft_config = kwargs.get("peft_config")
        if peft_config and kwargs.get("base_sync_done"):
            sent = await self._send_adapter(peft_config, weights)
        else:
            sent = await self._send_weights(weights)
        if self.has_server and kwargs.get("global_steps") is not None:
            await self._server().set_global_steps.remote(kwargs["global_steps"])
        return sent

    async def _send_adapter(
        self, peft_config: dict[str, Any], weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator[Any]
    ) -> int:
        """Collect the whole adapter (a LoRA request needs every tensor at once) and replace the server's."""
        tensors = []
        async for name, tensor in ensure_async_iterator(weights):
            if self.has_server:
                tensors.append((name, tensor.detach().to("cpu", copy=True)))
        if not self.has_server:
            return 0
        return await self._server().load_lora_adapter.remote(peft_config, tensors)

    async def _send_weights(self, weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator[Any]) -> int:
        """Stream full weights to the server in buckets of `bucket_bytes`."""
        sent = 0
        bucket: list[tuple[str, torch.Tensor]] = []
        bucket_size = 0
        async for name, tensor in ensure_async_iterator(weights):
            if not self.has_server:
                continue  # the iterator still has to run: full_tensor() is a collective
            cpu = tensor.detach().to("cpu", copy=True)
            bucket.append((name, cpu))
            bucket_size += cpu.numel() * cpu.element_size()
            if bucket_size >= self.bucket_bytes:
                sent += await self._send(bucket)
                bucket, bucket_size = [], 0
        if self.has_server:
            sent += await self._send(bucket)
        return sent

    async def _send(self, bucket: list[tuple[str, torch.Tensor]]) -> int:
        """Load one bucket into the server; returns how many tensors it took."""
        if not bucket:
            return 0
        return await self._server().load_weights.remote(bucket)
