"""The `cua.*` config's checks: `validate_cua_config` (keys and values, against the typed dataclasses of
`config.schema`, where the defaults, help and valid values live) and `validate_estimator_config` (settings that
cannot work together)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_cua.algos.estimators import ESTIMATORS, SDPO_ESTIMATORS
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.schema import CuaConfig


def validate_cua_config(cua: Mapping[str, Any]) -> None:
    """Raise `CuaConfigError` (one line) on an unknown `cua.*` key or an invalid value; missing keys are defaults."""
    CuaConfig.from_mapping(cua)


def _using(step_advantage: str) -> tuple[str, ...]:
    """Our estimators whose advantage step is `step_advantage` (the ones a `cua.<section>` setting needs)."""
    return tuple(name for name, e in ESTIMATORS.items() if e.step_advantage == step_advantage)


def validate_estimator_config(config: Mapping[str, Any], registered: tuple[str, ...] = ()) -> None:
    """One-line errors for algorithm settings that cannot work together (the whole resolved trainer config)."""
    algo = config.get("algorithm") or {}
    estimator = algo.get("adv_estimator")
    if registered and estimator not in registered:
        raise CuaConfigError(f"algorithm.adv_estimator={estimator!r} is not valid; valid: {', '.join(registered)}")
    cua, defaults = CuaConfig.from_mapping(config.get("cua")), CuaConfig()
    for section, wanted in (("sdpo", SDPO_ESTIMATORS), ("gigpo", _using("gigpo"))):
        if estimator in wanted:
            continue
        changed = [k for k, v in cua[section].items() if defaults[section][k] != v]
        if changed:
            raise CuaConfigError(
                f"cua.{section}.{changed[0]} is set but algorithm.adv_estimator={estimator}; "
                f"cua.{section}.* needs adv_estimator={' or '.join(wanted)}"
            )
    coso = cua["coso"]
    if coso.enable and estimator in SDPO_ESTIMATORS:
        raise CuaConfigError(
            f"cua.coso.enable=true needs PPO's loss, and algorithm.adv_estimator={estimator} trains with SDPO's own; "
            "valid with cua.coso: grpo, gigpo or another verl estimator"
        )
    changed = [k for k, v in coso.items() if k != "enable" and defaults["coso"][k] != v]
    if changed and not coso.enable:
        raise CuaConfigError(f"cua.coso.{changed[0]} is set but cua.coso.enable=false; set cua.coso.enable=true")


def estimator_warnings(config: Mapping[str, Any]) -> list[str]:
    """Settings that run but depart from SDPO's reference where the paper saw harm (the whole resolved config)."""
    estimator = (config.get("algorithm") or {}).get("adv_estimator")
    if estimator not in SDPO_ESTIMATORS:
        return []
    actor = ((config.get("actor_rollout_ref") or {}).get("actor")) or {}
    teacher = CuaConfig.from_mapping(config.get("cua")).sdpo.teacher
    warnings = []
    if actor.get("use_kl_loss"):
        warnings.append(
            f"algorithm.adv_estimator={estimator} with actor_rollout_ref.actor.use_kl_loss=True: SDPO's reference "
            "refuses a KL loss to a reference policy (its teacher is the regulariser); set use_kl_loss=False unless "
            "this departure is what you study"
        )
    if teacher == "current":
        warnings.append(
            "cua.sdpo.teacher=current distils toward the live policy itself, with no regularisation: the SDPO paper "
            "saw this teacher diverge (its Table 4); ema (the default) or frozen keep it near the initial policy"
        )
    return warnings


def _defaults() -> dict[str, Any]:
    """Every `cua.*` default, as plain nested dicts."""
    return CuaConfig().to_dict()
