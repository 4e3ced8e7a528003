"""`hf` rollout backend: transformers `generate` on CPU, for CPU runs and tests (production uses vLLM/SGLang).

Import-light on purpose: the verl plug-in calls `register_hf_rollout()` while `import verl` may still be running,
so this module imports nothing heavy; the replica, server and adapter load only when verl asks for them.
Select it with `actor_rollout_ref.rollout.name=hf`; knobs live under `actor_rollout_ref.rollout.engine_kwargs.hf`
(`num_cpus`, default 1: the Ray CPU slots and torch threads of each server).
"""

from __future__ import annotations

ROLLOUT_NAME = "hf"
ADAPTER_FQN = "verl_cua.integrations.verl.hf_rollout.adapter.HFServerAdapter"

__all__ = ["ADAPTER_FQN", "ROLLOUT_NAME", "register_hf_rollout"]


def _load_replica() -> type:
    """Import and return `HFReplica` (called by verl's replica registry on lookup)."""
    from verl_cua.integrations.verl.hf_rollout.replica import HFReplica

    return HFReplica


def register_hf_rollout() -> None:
    """Register rollout `hf` in verl's replica registry and server-adapter registry (idempotent)."""
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
    _ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = ADAPTER_FQN
