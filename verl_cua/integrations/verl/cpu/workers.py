"""The actor/rollout worker and resource-pool manager verl needs on the CPU platform."""

from __future__ import annotations

import os
from datetime import timedelta

import ray
import torch.distributed as dist
from verl.single_controller.ray.base import RayResourcePool, ResourcePoolManager

from verl_cua.integrations.verl.actor_worker import CuaActorRolloutRefWorker


def init_gloo_process_group() -> None:
    """Start this Ray worker's process group on gloo alone (verl asks for `cpu:gloo,<device>:<backend>`,
    which torch rejects as a duplicate when the device is the CPU)."""
    if dist.is_initialized():
        return
    dist.init_process_group(
        backend="gloo",
        rank=int(os.environ.get("RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        timeout=timedelta(minutes=30),
    )


class CPUActorRolloutRefWorker(CuaActorRolloutRefWorker):
    """Our actor/rollout/ref worker with a gloo process group; everything else is upstream."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        init_gloo_process_group()


class CPUResourcePoolManager(ResourcePoolManager):
    """verl's pool manager, with the capacity check counting Ray CPU slots instead of GPUs."""

    def create_resource_pool(self):
        """Create the pools as upstream does (bundles hold CPU slots on the cpu platform), then check capacity."""
        for name, process_on_nodes in self.resource_pool_spec.items():
            self.resource_pool_dict[name] = RayResourcePool(
                process_on_nodes=process_on_nodes,
                use_gpu=True,  # on the cpu platform the "device" resource is CPU
                max_colocate_count=self.max_colocate_count,
                name_prefix=name,
            )
        self._check_resource_available()

    def _check_resource_available(self):
        needed = sum(n for nodes in self.resource_pool_spec.values() for n in nodes)
        available = ray.available_resources().get("CPU", 0)
        if available < needed:
            raise ValueError(
                f"Ray offers {available:g} CPU slots but the CPU trainer needs {needed}; "
                "declare more: ray_kwargs.ray_init.num_cpus=32"
            )
