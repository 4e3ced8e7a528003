"""The `cua.*` config's checks: `validate_cua_config` (keys and values, against the typed dataclasses of
`config.schema`, where the defaults, help and valid values live) and `validate_estimator_config` (settings that
cannot work together)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_cua.algos.estimators import ESTIMATORS, estimators_using, step_advantages
from verl_cua.envs.base import observed_kwargs
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import plan_for
from verl_cua.integrations.verl.hooks import ADD_ONS, step_hook


def validate_cua_config(cua: Mapping[str, Any]) -> None:
    """Raise `CuaConfigError` (one line) on an unknown `cua.*` key or an invalid value (an observation type the env
    does not give among them); missing keys are defaults."""
    typed = CuaConfig.from_mapping(cua)
    env = typed.env
    try:
        observed_kwargs(env.name, env.kwargs, env.observation, env.observation_tokens)
    except ValueError as exc:
        raise CuaConfigError(f"cua.env.observation={env.observation}: {exc}") from None
    _check_planner(typed)


def _check_planner(cua: CuaConfig) -> None:
    """A planner's episode is one row per step (CODA rebuilds its context each step), and its executor settings
    must make an executor (one line naming what is wrong)."""
    if cua.planner.mode == "none":
        return
    if cua.planner.mode == "online" and cua.env.rows != "step":
        raise CuaConfigError("cua.planner.mode=online needs cua.env.rows=step: the planner's context is rebuilt each "
                             f"step, one training row per step (got cua.env.rows={cua.env.rows})")  # fmt: skip
    if cua.coso.enable:  # its per-token weights come from turn hooks the planner's rows do not run
        raise CuaConfigError(
            "cua.planner.mode with cua.coso.enable=true is not supported yet; set cua.coso.enable=false"
        )
    from verl_cua.envs.observation import shows_elements
    from verl_cua.eval.executor import ExecutorSettings

    if (
        cua.planner.mode == "online"
        and cua.executor.kind == "standin_grounding"
        and not shows_elements(cua.env.observation)
    ):  # it would wait at every step: a run of zero rewards that says nothing
        raise CuaConfigError(
            "cua.executor.kind=standin_grounding clicks the element a thought names from the screen's elements: set "
            f"cua.env.observation=screenshot_a11y_tree (or another type with elements), got {cua.env.observation}"
        )
    try:
        ExecutorSettings.from_mapping(dict(cua.executor))
    except ValueError as exc:
        raise CuaConfigError(f"cua.executor: {exc}") from None


def validate_estimator_config(
    config: Mapping[str, Any], registered: tuple[str, ...] = (), cua: CuaConfig | None = None
) -> None:
    """One-line errors for algorithm settings that cannot work together (the whole resolved trainer config; `cua`:
    its `cua` section already parsed). A step hook's section is for the estimators that run the hook; an add-on's
    settings need its `enable` and PPO's loss."""
    algo = config.get("algorithm") or {}
    estimator = algo.get("adv_estimator")
    if registered and estimator not in registered:
        raise CuaConfigError(f"algorithm.adv_estimator={estimator!r} is not valid; valid: {', '.join(registered)}")
    cua = cua if cua is not None else CuaConfig.from_mapping(config.get("cua"))
    plan, defaults = plan_for(estimator, cua), CuaConfig()
    if plan.teacher_pass and cua.planner.mode != "none":  # its teacher reprompts gui_agent's context, not CODA's
        raise CuaConfigError(f"cua.planner.mode={cua.planner.mode} with algorithm.adv_estimator={estimator} is not "
                             "supported yet (its teacher's context is not the planner's); use grpo")  # fmt: skip
    for hook in map(step_hook, step_advantages()):
        if plan.runs(hook.name) or hook.section is None:
            continue
        changed = [k for k, v in cua[hook.section].items() if defaults[hook.section][k] != v]
        if changed:
            raise CuaConfigError(
                f"cua.{hook.section}.{changed[0]} is set but algorithm.adv_estimator={estimator}; "
                f"cua.{hook.section}.* needs adv_estimator={' or '.join(estimators_using(hook.name))}"
            )
    for hook in map(step_hook, ADD_ONS):
        _check_add_on(hook.section, cua, defaults, estimator, plan.sdpo_loss is not None)


def _check_add_on(section: str, cua: CuaConfig, defaults: CuaConfig, estimator: str, own_loss: bool) -> None:
    """An add-on (`cua.<section>.enable`) adds to PPO's loss: not beside an estimator with its own, and its other
    settings only when it is on."""
    settings = cua[section]
    if settings.enable and own_loss:
        ppo = ["grpo", *(name for name in ESTIMATORS if plan_for(name, defaults).sdpo_loss is None)]
        raise CuaConfigError(
            f"cua.{section}.enable=true needs PPO's loss, and algorithm.adv_estimator={estimator} trains with "
            f"SDPO's own; valid with cua.{section}: {', '.join(ppo)} or another verl estimator"
        )
    changed = [k for k, v in settings.items() if k != "enable" and defaults[section][k] != v]
    if changed and not settings.enable:
        raise CuaConfigError(
            f"cua.{section}.{changed[0]} is set but cua.{section}.enable=false; set cua.{section}.enable=true"
        )


def estimator_warnings(config: Mapping[str, Any]) -> list[str]:
    """Settings that run but depart from SDPO's reference where the paper saw harm (the whole resolved config)."""
    estimator = (config.get("algorithm") or {}).get("adv_estimator")
    cua = CuaConfig.from_mapping(config.get("cua") or {})
    if not plan_for(estimator, cua).teacher_pass:
        return []
    actor = ((config.get("actor_rollout_ref") or {}).get("actor")) or {}
    warnings = []
    if actor.get("use_kl_loss"):
        warnings.append(
            f"algorithm.adv_estimator={estimator} with actor_rollout_ref.actor.use_kl_loss=True: SDPO's reference "
            "refuses a KL loss to a reference policy (its teacher is the regulariser); set use_kl_loss=False unless "
            "this departure is what you study"
        )
    if cua.sdpo.teacher == "current":
        warnings.append(
            "cua.sdpo.teacher=current distils toward the live policy itself, with no regularisation: the SDPO paper "
            "saw this teacher diverge (its Table 4); ema (the default) or frozen keep it near the initial policy"
        )
    return warnings


def _defaults() -> dict[str, Any]:
    """Every `cua.*` default, as plain nested dicts."""
    return CuaConfig().to_dict()
