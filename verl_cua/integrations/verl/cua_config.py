"""The `cua.*` config: defaults live in config/cua/default.yaml; this module checks keys and values."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_NAMES = ("miniwob", "osworld")  # built in; `verl_cua.envs.register_env` adds more
ROW_LAYOUTS = ("episode", "step")
IMAGE_STORAGES = ("png", "pixel_values")
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
        "image_storage",
        "success_threshold",
        "reset_timeout",
        "step_timeout",
        "evaluate_timeout",
    ),
    "action": ("format", "invalid_penalty", "max_tokens_per_step"),
    "sdpo": (
        "loss",
        "topk",
        "alpha",
        "add_tail",
        "normalize",
        "teacher",
        "ema_rate",
        "is_clip",
        "hybrid_weight",
        "demo",
        "feedback",
        "final_screenshot",
        "dont_reprompt_on_self_success",
        "max_feedback_chars",
        "max_demo_tokens",
    ),
    "gigpo": ("gamma", "step_weight", "norm", "anchor"),
    "buffer": ("per_task",),
    "replay": ("enable", "std_threshold", "mean_threshold"),
    "entropulse": (
        "schedule",
        "rl_steps",
        "sft_steps",
        "sft_batch_size",
        "ratio",
        "ema",
        "early_steps",
        "min_rl_steps",
    ),
    "trace": ("dir", "every", "fraction"),
}
SDPO_TEACHERS = ("current", "ema")
SDPO_LOSSES = ("logit", "token")
SDPO_NORMALIZE = ("reprompted", "all")
GIGPO_NORMS = ("mean", "std")
GIGPO_ANCHORS = ("screen", "screenshot", "a11y")
ENTROPULSE_SCHEDULES = ("none", "fixed", "entropy")


CUA_ESTIMATORS = ("sdpo", "sdpo_grpo", "gigpo")
SDPO_ESTIMATORS = ("sdpo", "sdpo_grpo")
DEFAULTS_YAML = Path(__file__).parent / "config" / "cua" / "default.yaml"


class CuaConfigError(ValueError):
    """A `cua.*` key or value that does not exist; the message names the valid ones."""


def validate_estimator_config(config: Mapping[str, Any], registered: tuple[str, ...] = ()) -> None:
    """One-line errors for algorithm settings that cannot work together (the whole resolved trainer config)."""
    algo = config.get("algorithm") or {}
    estimator = algo.get("adv_estimator")
    if registered and estimator not in registered:
        raise CuaConfigError(f"algorithm.adv_estimator={estimator!r} is not valid; valid: {', '.join(registered)}")
    cua = config.get("cua") or {}
    defaults = _defaults()
    for section, wanted in (("sdpo", SDPO_ESTIMATORS), ("gigpo", ("gigpo",))):
        if estimator in wanted:
            continue
        changed = [k for k, v in (cua.get(section) or {}).items() if defaults.get(section, {}).get(k, v) != v]
        if changed:
            raise CuaConfigError(
                f"cua.{section}.{changed[0]} is set but algorithm.adv_estimator={estimator}; "
                f"cua.{section}.* needs adv_estimator={' or '.join(wanted)}"
            )


@functools.cache
def _defaults() -> dict[str, Any]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(DEFAULTS_YAML), resolve=True)


def validate_cua_config(cua: Mapping[str, Any]) -> None:
    """Raise `CuaConfigError` (one line) on an unknown `cua.*` key or an invalid value."""
    for section, body in cua.items():
        if section not in SECTIONS:
            raise CuaConfigError(f"unknown key cua.{section}; valid: {', '.join(SECTIONS)}")
        for key in body or {}:
            if key not in SECTIONS[section]:
                raise CuaConfigError(f"unknown key cua.{section}.{key}; valid: {', '.join(SECTIONS[section])}")
    env, action = cua.get("env", {}), cua.get("action", {})
    _choice("cua.env.name", env.get("name"), env_names())
    _choice("cua.env.rows", env.get("rows"), ROW_LAYOUTS)
    _choice("cua.env.image_storage", env.get("image_storage", "png"), IMAGE_STORAGES)
    _choice("cua.action.format", action.get("format"), TRAINABLE_FORMATS)
    for key in ("pool_size", "max_steps", "max_pixels"):
        _positive_int(f"cua.env.{key}", env.get(key))
    _positive_int("cua.action.max_tokens_per_step", action.get("max_tokens_per_step"))
    if not isinstance(env.get("history_images"), int) or env.get("history_images") < 1:
        raise CuaConfigError(f"cua.env.history_images must be an integer >= 1, got {env.get('history_images')!r}")
    _number("cua.action.invalid_penalty", action.get("invalid_penalty"), low=0.0)
    trace = cua.get("trace") or {}
    if trace:
        _positive_int("cua.trace.every", trace.get("every"))
        _number("cua.trace.fraction", trace.get("fraction"), low=0.0, high=1.0)
    _validate_algorithm_sections(cua)


def _validate_algorithm_sections(cua: Mapping[str, Any]) -> None:
    sdpo, gigpo = cua.get("sdpo") or {}, cua.get("gigpo") or {}
    replay, pulse = cua.get("replay") or {}, cua.get("entropulse") or {}
    if sdpo:
        _choice("cua.sdpo.loss", sdpo.get("loss"), SDPO_LOSSES)
        _positive_int("cua.sdpo.topk", sdpo.get("topk"))
        _number("cua.sdpo.alpha", sdpo.get("alpha"), low=0.0, high=1.0)
        _choice("cua.sdpo.normalize", sdpo.get("normalize"), SDPO_NORMALIZE)
        _positive_int("cua.sdpo.max_demo_tokens", sdpo.get("max_demo_tokens"))
        _choice("cua.sdpo.teacher", sdpo.get("teacher"), SDPO_TEACHERS)
        _number("cua.sdpo.ema_rate", sdpo.get("ema_rate"), low=0.0, high=1.0)
        if sdpo.get("is_clip") is not None:
            _number("cua.sdpo.is_clip", sdpo.get("is_clip"), low=1.0)
        _number("cua.sdpo.hybrid_weight", sdpo.get("hybrid_weight"), low=0.0)
        _positive_int("cua.sdpo.max_feedback_chars", sdpo.get("max_feedback_chars"))
    if gigpo:
        _number("cua.gigpo.gamma", gigpo.get("gamma"), low=0.0, high=1.0)
        _number("cua.gigpo.step_weight", gigpo.get("step_weight"), low=0.0)
        _choice("cua.gigpo.norm", gigpo.get("norm"), GIGPO_NORMS)
        _choice("cua.gigpo.anchor", gigpo.get("anchor"), GIGPO_ANCHORS)
    if "buffer" in cua:
        _positive_int("cua.buffer.per_task", (cua.get("buffer") or {}).get("per_task"))
    if replay:
        _number("cua.replay.std_threshold", replay.get("std_threshold"), low=0.0)
        _number("cua.replay.mean_threshold", replay.get("mean_threshold"), low=0.0, high=1.0)
    if pulse:
        _choice("cua.entropulse.schedule", pulse.get("schedule"), ENTROPULSE_SCHEDULES)
        for key in ("rl_steps", "sft_steps", "sft_batch_size", "early_steps", "min_rl_steps"):
            _positive_int(f"cua.entropulse.{key}", pulse.get(key))
        _number("cua.entropulse.ratio", pulse.get("ratio"), low=0.0, high=1.0)
        _number("cua.entropulse.ema", pulse.get("ema"), low=0.0, high=1.0)


def _choice(key: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise CuaConfigError(f"{key}={value!r} is not valid; valid: {', '.join(valid)}")


def _number(key: str, value: Any, low: float | None = None, high: float | None = None) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and ((low is not None and value < low) or (high is not None and value > high)):
        ok = False
    if not ok:
        bounds = f" in [{low:g}, {high:g}]" if high is not None else f" >= {low:g}" if low is not None else ""
        raise CuaConfigError(f"{key} must be a number{bounds}, got {value!r}")


def _positive_int(key: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CuaConfigError(f"{key} must be a positive integer, got {value!r}")


def env_names() -> tuple[str, ...]:
    """The env names `cua.env.name` accepts: the built-in ones and any registered with `register_env`."""
    from verl_cua.envs import ENV_REGISTRY

    return tuple(dict.fromkeys([*ENV_NAMES, *sorted(ENV_REGISTRY)]))
