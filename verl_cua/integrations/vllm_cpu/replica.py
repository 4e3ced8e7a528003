"""verl's vLLM replica on the cpu platform: its workers name a CPU slot where verl asks Ray for an accelerator id."""

from __future__ import annotations

import asyncio

from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMReplica

CPU_SLOT_ID = "0"  # what a CPU worker reports as its device: vLLM-CPU sees no CUDA devices either way


def report_cpu_slot(_actor=None) -> None:
    """In a worker process: Ray's `get_accelerator_ids()` also answers "CPU" (Ray lists only real accelerators),
    which `vLLMReplica.launch_servers` indexes by the platform's resource name. Upstream: `.get(name, ["0"])`."""
    from ray.runtime_context import RuntimeContext

    original = RuntimeContext.get_accelerator_ids
    if getattr(original, "cua_cpu_slot", False):
        return

    def get_accelerator_ids(self) -> dict[str, list[str]]:
        ids = original(self)
        ids.setdefault("CPU", [CPU_SLOT_ID])
        return ids

    get_accelerator_ids.cua_cpu_slot = True
    RuntimeContext.get_accelerator_ids = get_accelerator_ids


class CPUvLLMReplica(vLLMReplica):
    """verl's vLLM replica, with each worker reporting its CPU slot before the servers launch."""

    async def launch_servers(self):
        """Teach each worker its CPU slot, then launch verl's vLLM HTTP servers as upstream does."""
        await asyncio.gather(*[worker.__ray_call__.remote(report_cpu_slot) for worker in self.workers])
        await super().launch_servers()
