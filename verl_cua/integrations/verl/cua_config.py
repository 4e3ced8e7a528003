"""The `cua.*` config's checks: `validate_cua_config` (keys and values, against the typed dataclasses of
`cua_schema`, where the defaults, help and valid values live) and `validate_estimator_config` (settings that
cannot work together). The constants here are re-exported for the modules that import them from this one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl_cua.integrations.verl.cua_fields import (
    ENTROPULSE_SCHEDULES,
    ENV_NAMES,
    GIGPO_ANCHORS,
    GIGPO_NORMS,
    IMAGE_STORAGES,
    ROW_LAYOUTS,
    SDPO_LOSSES,
    SDPO_NORMALIZE,
    SDPO_TEACHERS,
    TRAINABLE_FORMATS,
    CuaConfigError,
    env_names,
)
from verl_cua.integrations.verl.cua_schema import CuaConfig

__all__ = [
    "CUA_ESTIMATORS",
    "DEFAULTS_YAML",
    "ENTROPULSE_SCHEDULES",
    "ENV_NAMES",
    "GIGPO_ANCHORS",
    "GIGPO_NORMS",
    "IMAGE_STORAGES",
    "ROW_LAYOUTS",
    "SDPO_ESTIMATORS",
    "SDPO_LOSSES",
    "SDPO_NORMALIZE",
    "SDPO_TEACHERS",
    "TRAINABLE_FORMATS",
    "CuaConfig",
    "CuaConfigError",
    "env_names",
    "validate_cua_config",
    "validate_estimator_config",
]

CUA_ESTIMATORS = ("sdpo", "sdpo_grpo", "gigpo")
SDPO_ESTIMATORS = ("sdpo", "sdpo_grpo")
DEFAULTS_YAML = Path(__file__).parent / "config" / "cua" / "default.yaml"  # generated from cua_schema


def validate_cua_config(cua: Mapping[str, Any]) -> None:
    """Raise `CuaConfigError` (one line) on an unknown `cua.*` key or an invalid value; missing keys are defaults."""
    CuaConfig.from_mapping(cua)


def validate_estimator_config(config: Mapping[str, Any], registered: tuple[str, ...] = ()) -> None:
    """One-line errors for algorithm settings that cannot work together (the whole resolved trainer config)."""
    algo = config.get("algorithm") or {}
    estimator = algo.get("adv_estimator")
    if registered and estimator not in registered:
        raise CuaConfigError(f"algorithm.adv_estimator={estimator!r} is not valid; valid: {', '.join(registered)}")
    cua, defaults = CuaConfig.from_mapping(config.get("cua")), CuaConfig()
    for section, wanted in (("sdpo", SDPO_ESTIMATORS), ("gigpo", ("gigpo",))):
        if estimator in wanted:
            continue
        changed = [k for k, v in cua[section].items() if defaults[section][k] != v]
        if changed:
            raise CuaConfigError(
                f"cua.{section}.{changed[0]} is set but algorithm.adv_estimator={estimator}; "
                f"cua.{section}.* needs adv_estimator={' or '.join(wanted)}"
            )


def _defaults() -> dict[str, Any]:
    """Every `cua.*` default, as plain nested dicts."""
    return CuaConfig().to_dict()
