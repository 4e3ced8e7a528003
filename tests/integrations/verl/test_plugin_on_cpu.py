"""The `verl.plugins` entry point registers our names in a fresh process that only does `import verl`."""

import json
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest


def test_entry_point_is_declared():
    eps = [ep for ep in entry_points(group="verl.plugins") if ep.value.startswith("verl_cua")]
    assert [(ep.name, ep.value) for ep in eps] == [("cua", "verl_cua.integrations.verl.plugin")]


def _fresh(script: str, env_extra: dict | None = None) -> dict:
    import os

    env = {**os.environ, **(env_extra or {})}
    env.pop("VERL_PLATFORM", None) if not env_extra or "VERL_PLATFORM" not in env_extra else None
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_verl_registers_platform_engine_agent_loop_and_rollout_lazily():
    out = _fresh(
        """
        import json, sys
        import verl
        light = "verl.experimental.agent_loop.agent_loop" not in sys.modules
        from verl.plugin.platform import PlatformRegistry, get_platform
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
        import verl.workers.engine.fsdp.transformer_impl
        from verl.workers.engine.base import EngineRegistry
        from verl.workers.rollout.base import _ROLLOUT_REGISTRY, get_rollout_class
        from verl.workers.rollout.replica import get_rollout_replica_class
        from verl_cua.integrations.verl.plugin import missing_registrations
        print(json.dumps({
            "light": light,
            "platform": get_platform().device_name,
            "gui_agent": _agent_loop_registry.get("gui_agent"),
            "engine": EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
            "adapter": get_rollout_class("hf", "async").__name__,
            "replica": get_rollout_replica_class("hf").__name__,
            "missing": missing_registrations(),
        }))
        """
    )
    assert out["light"], "the plug-in must not import the agent-loop module on `import verl`"
    assert out["platform"] == "cpu"  # auto-detected: this machine has no accelerator
    assert out["gui_agent"] == {"_target_": "verl_cua.integrations.verl.agent_loop.GUIAgentLoop"}
    assert out["engine"] == "CPUFSDPEngineWithLMHead"
    assert out["adapter"] == "HFServerAdapter"
    assert out["replica"] == "HFReplica"
    assert out["missing"] == []


def test_importing_the_plugin_by_hand_registers_when_entry_points_are_off():
    out = _fresh(
        """
        import json
        import verl
        from verl_cua.integrations.verl import plugin
        try:
            plugin.check_registrations()
            print(json.dumps({"error": None}))
        except RuntimeError as exc:
            print(json.dumps({"error": str(exc)}))
        """,
        {"VERL_USE_EXTERNAL_PLUGINS": "none"},
    )
    # importing the plug-in module by hand registers everything, so the check passes even with entry points off
    assert out["error"] is None


def test_self_check_fails_in_one_line_when_a_registration_is_missing():
    out = _fresh(
        """
        import json
        import verl
        from verl_cua.integrations.verl import plugin
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
        _agent_loop_registry.pop("gui_agent")
        try:
            plugin.check_registrations()
            print(json.dumps({"error": None}))
        except RuntimeError as exc:
            print(json.dumps({"error": str(exc)}))
        """
    )
    assert out["error"] and "agent loop 'gui_agent'" in out["error"] and "\n" not in out["error"]


def test_each_row_of_the_estimator_table_registers_its_name_from_its_folder_and_has_its_step_hook():
    """One row of algos.estimators.ESTIMATORS is all an estimator of ours needs outside its folders: plugin.REGISTERED
    (what `verl-cua list verl` shows) follows it, the module it names registers the name with verl, and the folder
    of its step advantage exports the hook the plan runs."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from verl_cua.algos.estimators import ESTIMATORS
    from verl_cua.integrations.verl import plugin
    from verl_cua.integrations.verl.hooks import step_hook

    assert plugin.ESTIMATORS == tuple(ESTIMATORS)
    plugin.register_estimators()
    for name, row in ESTIMATORS.items():
        module = f"verl_cua.integrations.verl.{row.step_advantage}.{row.module}"
        assert ("advantage estimator", name, module) in plugin.REGISTERED
        assert ADV_ESTIMATOR_REGISTRY[name].__module__ == module, name
        assert step_hook(row.step_advantage).name == row.step_advantage
    with pytest.raises(ValueError, match="exports no StepHook"):
        step_hook("rows")  # a folder that is no algorithm's
