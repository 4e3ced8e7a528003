"""The `cua.*` config: defaults live in config/cua/default.yaml; this module checks keys and values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ENV_NAMES = ("miniwob", "osworld")
ROW_LAYOUTS = ("episode", "step")
TRAINABLE_FORMATS = ("qwen3vl", "qwen25vl", "uitars", "pyautogui")
SECTIONS: dict[str, tuple[str, ...]] = {
    "env": (
        "name",
        "kwargs",
        "pool_size",
        "max_steps",
        "history_images",
        "rows",
        "max_pixels",
        "success_threshold",
        "reset_timeout",
        "step_timeout",
        "evaluate_timeout",
    ),
    "action": ("format", "invalid_penalty", "max_tokens_per_step"),
}
# Sections the algorithms and the trajectory dump add; checked by their own code.
OPEN_SECTIONS = ("sdpo", "entropulse", "replay", "gigpo", "trace")


class CuaConfigError(ValueError):
    """A `cua.*` key or value that does not exist; the message names the valid ones."""


def validate_cua_config(cua: Mapping[str, Any]) -> None:
    """Raise `CuaConfigError` (one line) on an unknown `cua.*` key or an invalid value."""
    for section, body in cua.items():
        if section in OPEN_SECTIONS:
            continue
        if section not in SECTIONS:
            raise CuaConfigError(f"unknown key cua.{section}; valid: {', '.join([*SECTIONS, *OPEN_SECTIONS])}")
        for key in body or {}:
            if key not in SECTIONS[section]:
                raise CuaConfigError(f"unknown key cua.{section}.{key}; valid: {', '.join(SECTIONS[section])}")
    env, action = cua.get("env", {}), cua.get("action", {})
    _choice("cua.env.name", env.get("name"), ENV_NAMES)
    _choice("cua.env.rows", env.get("rows"), ROW_LAYOUTS)
    _choice("cua.action.format", action.get("format"), TRAINABLE_FORMATS)
    for key in ("pool_size", "max_steps", "max_pixels"):
        _positive_int(f"cua.env.{key}", env.get(key))
    _positive_int("cua.action.max_tokens_per_step", action.get("max_tokens_per_step"))
    if not isinstance(env.get("history_images"), int) or env.get("history_images") < 1:
        raise CuaConfigError(f"cua.env.history_images must be an integer >= 1, got {env.get('history_images')!r}")
    penalty = action.get("invalid_penalty")
    if not isinstance(penalty, int | float) or penalty < 0:
        raise CuaConfigError(f"cua.action.invalid_penalty must be a number >= 0, got {penalty!r}")


def _choice(key: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise CuaConfigError(f"{key}={value!r} is not valid; valid: {', '.join(valid)}")


def _positive_int(key: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CuaConfigError(f"{key} must be a positive integer, got {value!r}")
