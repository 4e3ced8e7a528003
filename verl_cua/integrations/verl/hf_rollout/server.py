"""`HFServer`: the `hf` rollout's server, transformers `generate` on CPU behind verl's token-in/token-out API.

For CPU runs and tests only; production rollouts use vLLM/SGLang. A plain class: `HFReplica` wraps it with
`ray.remote` and verl's `LLMServerClient` calls `generate` on the actor. One request runs at a time (an
`asyncio.Lock` shared with `load_weights`), in a worker thread so the actor keeps answering control calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig, RolloutConfig
from verl.workers.rollout.replica import TokenOutput

from verl_cua.integrations.verl.hf_rollout.generation import (
    Generator,
    Sampling,
    load_model,
    max_position_embeddings,
)
from verl_cua.integrations.verl.hf_rollout.lora import LoraSlot
from verl_cua.integrations.verl.hf_rollout.names import normalize_param_name

__all__ = ["HFServer", "normalize_param_name", "stop_token_ids"]

logger = logging.getLogger(__name__)


def stop_token_ids(model_config: HFModelConfig) -> list[int]:
    """EOS ids the model stops on by default: the tokenizer's and the hub generation config's (as vLLM does)."""
    ids = [getattr(model_config.tokenizer, "eos_token_id", None)]
    eos = getattr(model_config.generation_config, "eos_token_id", None)
    ids += eos if isinstance(eos, list | tuple) else [eos]
    return sorted({int(i) for i in ids if i is not None})


class HFServer:
    """One `hf` rollout server: a CPU transformers model answering verl's `generate` and lifecycle calls."""

    def __init__(
        self,
        config: Any,
        model_config: Any,
        replica_rank: int = 0,
        num_cpus: int | None = None,
    ):
        self.config: RolloutConfig = omega_conf_to_dataclass(config, dataclass_type=RolloutConfig)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.replica_rank = replica_rank
        if num_cpus:
            torch.set_num_threads(int(num_cpus))
        self.tokenizer = self.model_config.tokenizer
        self.processor = self.model_config.processor
        model = load_model(
            self.model_config.local_path, self.model_config.hf_config, self.model_config.trust_remote_code
        )
        self.max_model_len = min(
            self.config.max_model_len or max_position_embeddings(model.config),
            max_position_embeddings(model.config),
        )
        self.eos_token_ids = stop_token_ids(self.model_config)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is None and self.eos_token_ids:
            pad = self.eos_token_ids[0]
        self.generator = Generator(model, self.tokenizer, self.processor, pad_token_id=pad)
        self.model = model
        self.lora = LoraSlot(model)
        self.banned_token_ids = self.generator.banned_token_ids
        self.image_token_id = self.generator.image_token_id
        self.video_token_id = self.generator.video_token_id
        self.global_steps: int | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    async def init(self) -> bool:
        """Ready check: the model is loaded once the actor's constructor has returned."""
        return True

    # ---- generation -----------------------------------------------------------------------------------------

    async def generate(
        self,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        audio_data: list[Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """Token-in/token-out generation for one request (verl's `LLMServerClient.generate` contract)."""
        if video_data or audio_data:
            raise NotImplementedError("hf rollout supports text and image inputs only; use vLLM/SGLang for video/audio")
        prompt_ids = [int(t) for t in prompt_ids]
        params = dict(sampling_params)
        async with self._get_lock():
            token_ids, log_probs = await asyncio.to_thread(
                self._generate_blocking, prompt_ids, params, image_data, mm_processor_kwargs or {}
            )
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def _generate_blocking(
        self,
        prompt_ids: list[int],
        params: dict[str, Any],
        image_data: list[Any] | None,
        mm_kwargs: dict[str, Any],
    ) -> tuple[list[int], list[float] | None]:
        """Run `model.generate` for one prompt; returns response ids and (when asked) their log-probs."""
        if params.get("prompt_logprobs"):
            raise NotImplementedError("hf rollout does not compute prompt_logprobs; use vLLM/SGLang")
        return self.generator.generate(prompt_ids, self._sampling(params, len(prompt_ids)), image_data, mm_kwargs)

    def _sampling(self, params: dict[str, Any], prompt_len: int) -> Sampling:
        """vLLM-style sampling params (falling back to the rollout config) as one request's `Sampling`."""
        return Sampling(
            max_new_tokens=self._max_new_tokens(params, prompt_len),
            temperature=float(params.get("temperature", self.config.temperature) or 0.0),
            top_p=float(params.get("top_p", 1.0)),
            top_k=int(params.get("top_k", -1) or 0),
            repetition_penalty=float(params.get("repetition_penalty", self.config.repetition_penalty)),
            stop_ids=tuple(self._stop_ids(params)),
            seed=self._seed(params),
            logprobs=bool(params.get("logprobs")),
        )

    def _max_new_tokens(self, params: dict[str, Any], prompt_len: int) -> int:
        """vLLM's rule: max_tokens/max_new_tokens if given, else the response budget; clamped to the context."""
        room = self.max_model_len - prompt_len
        if room < 1:
            raise ValueError(
                f"hf rollout: prompt length {prompt_len} leaves no room in max_model_len {self.max_model_len}; "
                "shorten the prompt or raise rollout.max_model_len"
            )
        if params.get("max_tokens") is not None:
            wanted = int(params["max_tokens"])
        elif params.get("max_new_tokens") is not None:
            wanted = int(params["max_new_tokens"])
        else:
            budget = self.config.prompt_length + self.config.response_length - prompt_len
            wanted = min(self.config.response_length, budget)
        return max(1, min(wanted, room))

    def _stop_ids(self, params: dict[str, Any]) -> list[int]:
        """Token ids that end generation: model EOS (unless ignore_eos) plus the request's stop_token_ids."""
        ignore_eos = params.get("ignore_eos", self.config.ignore_eos)
        ids = [] if ignore_eos else list(self.eos_token_ids)
        ids += [int(t) for t in params.get("stop_token_ids") or []]
        return sorted(set(ids))

    def _seed(self, params: dict[str, Any]) -> int | None:
        """The request's seed, else replica_rank + rollout.seed under full_determinism (as vLLM), else None."""
        if params.get("seed") is not None:
            return int(params["seed"])
        if self.config.full_determinism:
            return self.replica_rank + self.config.seed
        return None

    def _vision_inputs(
        self, input_ids: torch.Tensor, image_data: list[Any] | None, mm_kwargs: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        """pixel_values/image_grid_thw for the images and mm_token_type_ids (M-RoPE) for a VL model."""
        return self.generator.vision_inputs(input_ids, image_data, mm_kwargs)

    def _get_lock(self) -> asyncio.Lock:
        """The lock serialising generate/load_weights, (re)created for the running event loop."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    # ---- weights --------------------------------------------------------------------------------------------

    async def load_weights(self, named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy trainer tensors into the model in place (dtype cast, LoRA `.base_layer` names too); returns a count."""
        items = list(named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors)
        async with self._get_lock():
            return await asyncio.to_thread(self._load_weights_blocking, items)

    @torch.no_grad()
    def _load_weights_blocking(self, items: list[tuple[str, torch.Tensor]]) -> int:
        """Resolve every name first (all or nothing), then copy."""
        state = self._named_tensors()
        resolved, unknown = [], []
        for name, tensor in items:
            key = normalize_param_name(name, state)
            if key is None:
                unknown.append(name)
            else:
                resolved.append((key, tensor))
        if unknown:
            raise KeyError(
                f"hf rollout: {len(unknown)} weight name(s) match no model parameter, e.g. {unknown[:3]}; "
                f"model keys look like {list(state)[:3]}"
            )
        for key, tensor in resolved:
            target = state[key]
            if tuple(target.shape) != tuple(tensor.shape):
                raise ValueError(
                    f"hf rollout: weight {key} has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}"
                )
            target.copy_(tensor.detach().to(device=target.device, dtype=target.dtype))
        return len(resolved)

    async def load_lora_adapter(
        self,
        peft_config: Mapping[str, Any],
        named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
    ) -> int:
        """Replace the served LoRA adapter (vLLM's remove_lora + add_lora); returns how many tensors it took."""
        items = list(named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors)
        async with self._get_lock():
            return await asyncio.to_thread(self.lora.load, peft_config, items)

    def _named_tensors(self) -> dict[str, torch.Tensor]:
        """Every name a weight may arrive under: state_dict keys plus tied aliases (e.g. lm_head.weight)."""
        named = dict(self.model.state_dict())
        named.update(self.model.named_parameters(remove_duplicate=False))
        named.update(self.model.named_buffers(remove_duplicate=False))
        return named

    # ---- lifecycle (no-ops on CPU: no KV cache to free, no engine to pause) ---------------------------------

    async def set_global_steps(self, global_steps: int | None) -> None:
        """Record the weights' training step; returned in every TokenOutput's extra_fields."""
        self.global_steps = global_steps

    async def wake_up(self, tags: list[str] | None = None) -> None:
        """No-op: the CPU model stays resident."""

    async def sleep(self) -> None:
        """No-op: the CPU model stays resident."""

    async def clear_kv_cache(self) -> None:
        """No-op: `generate` builds a fresh cache per request."""

    async def release_kv_cache(self) -> None:
        """No-op: there is no persistent KV cache."""

    async def resume_kv_cache(self) -> None:
        """No-op: there is no persistent KV cache."""

    async def resume_generation(self) -> None:
        """No-op: requests are never paused."""

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        """Nothing to abort: a running `generate` always completes."""
        return {"aborted_count": 0, "request_ids": []}

    async def start_profile(self, **kwargs: Any) -> None:
        """No-op: no profiler for the hf backend."""

    async def stop_profile(self) -> None:
        """No-op: no profiler for the hf backend."""
