"""`preset=cpu_vllm` composes as `preset=cpu` with verl's vLLM rollout set up for the CPU, and rollout `vllm` resolves
to our CPU replica on the cpu platform only (verl's own elsewhere)."""

import sys
import types

import pytest

from verl_cua.testing.cpu_config import cpu_config

pytest.importorskip("verl")


def test_the_preset_is_cpu_with_the_vllm_rollout_set_up_for_the_cpu():
    base, vllm = cpu_config("m"), cpu_config("m", "preset=cpu_vllm")
    rollout = vllm.actor_rollout_ref.rollout
    assert (rollout.name, rollout.enforce_eager, rollout.enable_sleep_mode, rollout.free_cache_engine) == (
        "vllm", True, False, False)  # fmt: skip
    assert rollout.dtype == "float32" and rollout.gpu_memory_utilization <= 0.1
    assert dict(rollout.engine_kwargs.vllm.limit_mm_per_prompt) == {"image": 4, "video": 0}
    assert base.actor_rollout_ref.rollout.name == "hf"
    # everything else is preset=cpu's
    assert vllm.actor_rollout_ref.actor == base.actor_rollout_ref.actor and vllm.trainer == base.trainer


def test_rollout_vllm_is_our_cpu_replica_on_the_cpu_platform_and_verls_elsewhere(monkeypatch):
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    import verl_cua.integrations.verl.plugin  # noqa: F401  (registers, as verl's plug-in loader does)
    from verl_cua.integrations import vllm_cpu

    assert RolloutReplicaRegistry._registry["vllm"] is vllm_cpu.load_vllm_replica

    class Platform:
        device_name = "cuda"

    # stand-ins for the two replica modules (this venv has no vllm to import the real ones)
    ours, verls = types.ModuleType("ours"), types.ModuleType("verls")
    ours.CPUvLLMReplica, verls.vLLMReplica = "our CPU replica", "verl's replica"
    monkeypatch.setitem(sys.modules, "verl_cua.integrations.vllm_cpu.replica", ours)
    monkeypatch.setitem(sys.modules, "verl.workers.rollout.vllm_rollout.vllm_async_server", verls)
    monkeypatch.setattr("verl.plugin.platform.get_platform", lambda: Platform())
    assert vllm_cpu.load_vllm_replica() == "verl's replica"
    Platform.device_name = "cpu"
    assert vllm_cpu.load_vllm_replica() == "our CPU replica"
