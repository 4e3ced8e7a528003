"""`HFReplica`: verl's `RolloutReplica` for the `hf` backend; one CPU `HFServer` Ray actor per replica.

For CPU runs and tests only; production rollouts use vLLM/SGLang. Supports verl's hybrid mode (the trainer's
`init_hybrid`, the only mode the PPO trainer uses for the policy); the server needs no GPU, so it is not pinned
to the trainer workers' node or devices.
"""

from __future__ import annotations

from typing import Any

import ray
from verl.workers.rollout.replica import RolloutReplica

from verl_cua.integrations.verl.hf_rollout.server import DEFAULT_MAX_BATCH, HFServer

DEFAULT_NUM_CPUS = 1


def server_actor_name(replica_rank: int, node_rank: int = 0) -> str:
    """Ray actor name of a replica's server (`HFServerAdapter` finds its server by it)."""
    return f"hf_server_{replica_rank}_{node_rank}"


def hf_engine_kwargs(config: Any) -> dict[str, Any]:
    """`rollout.engine_kwargs.hf` as a plain dict (empty when unset)."""
    engine_kwargs = getattr(config, "engine_kwargs", None) or {}
    return dict(engine_kwargs.get("hf", None) or {})


class HFReplica(RolloutReplica):
    """A rollout replica served by one CPU `HFServer` actor (transformers `generate`)."""

    def rollout_worker_use_gpu(self) -> bool:
        """The hf server runs on CPU."""
        return False

    @property
    def num_cpus(self) -> int:
        """Ray CPU slots (and torch threads) of the server: `rollout.engine_kwargs.hf.num_cpus`, default 1."""
        return int(hf_engine_kwargs(self.config).get("num_cpus", DEFAULT_NUM_CPUS))

    @property
    def max_batch(self) -> int:
        """Most requests one batched generate takes: `rollout.engine_kwargs.hf.max_batch`, default 8."""
        return int(hf_engine_kwargs(self.config).get("max_batch", DEFAULT_MAX_BATCH))

    async def init_standalone(self) -> None:
        """Not supported: verl's standalone mode builds GPU worker groups."""
        raise NotImplementedError("hf rollout supports hybrid mode only (rollout on the trainer's workers)")

    async def init_colocated(self, resource_pool: Any) -> None:
        """Not supported: verl's colocated mode is for reward/teacher models served by vLLM/SGLang."""
        raise NotImplementedError("hf rollout supports hybrid mode only (rollout on the trainer's workers)")

    async def launch_servers(self) -> None:
        """Start this replica's `HFServer` actor, wait until its model is loaded, and publish its handle."""
        name = server_actor_name(self.replica_rank) + self.name_suffix
        server = (
            ray.remote(HFServer)
            .options(
                name=name,
                num_cpus=self.num_cpus,
                num_gpus=0,
                max_concurrency=self.max_concurrency,
            )
            .remote(
                config=self.config,
                model_config=self.model_config,
                replica_rank=self.replica_rank,
                num_cpus=self.num_cpus,
                max_batch=self.max_batch,
            )
        )
        await server.init.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf-replica-{self.replica_rank}{self.name_suffix}"
