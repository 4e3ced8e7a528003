"""The `GUIEnv` protocol every desktop speaks, its observation/step types, `begin_step` (the checks every `step()`
opens with), and the env registry behind `make_env`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from PIL import Image

from verl_cua.actions import ParsedAction, parse_action
from verl_cua.envs.spec import EnvSpec
from verl_cua.registry import Registry

INFO_KEYS = ("action_valid", "infra_failure", "error")
T = TypeVar("T")


@dataclass
class Observation:
    """What the agent sees: a screenshot, the task instruction, and env-specific extras."""

    screenshot: Image.Image
    instruction: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def screen(self) -> tuple[int, int]:
        """`(width, height)` of the screenshot: the coordinate space actions are parsed into."""
        return self.screenshot.size


@dataclass
class StepResult:
    """One step's outcome. `info` always has `action_valid`, `infra_failure` and `error`."""

    observation: Observation
    reward: float
    done: bool
    info: dict[str, Any]


class InfraFailure(RuntimeError):
    """The desktop or browser broke (not the agent's fault); callers turn it into `infra_failure=True`."""


class EnvUsageError(ValueError):
    """A caller mistake (unknown task, model text without a format, step before reset): raised, never hidden
    as an infra failure."""


@runtime_checkable
class GUIEnv(Protocol):
    """A desktop that resets to a task, takes actions and scores the result.

    `EnvPool` also uses, where an env has them: `healthy()`, `pids()` or `kill()` (health checks and rebuilds), and
    `task_key(task)` with `loaded_key` (an env that loads a task at a cost, such as a MiniWoB++ browser on one task
    page, is leased for tasks it has loaded)."""

    def reset(self, task: Any) -> Observation:
        """Start `task`; return the first observation."""

    def step(self, action: ParsedAction | str, *, format: str | None = None) -> StepResult:
        """Apply model text (parsed with `format` or the env's default) or a `ParsedAction`."""

    def evaluate(self) -> float:
        """Score the episode so far in [0, 1]."""

    def close(self) -> None:
        """Release every process and file the env holds."""


def step_info(*, action_valid: bool, infra_failure: bool = False, error: str | None = None, **extra) -> dict:
    """An `info` dict with the three keys every env guarantees, plus extras."""
    return {"action_valid": action_valid, "infra_failure": infra_failure, "error": error, **extra}


def to_parsed(action: ParsedAction | str, fmt: str | None, screen: tuple[int, int]) -> ParsedAction:
    """Model text -> ParsedAction on `screen`; a ParsedAction passes through. No format is a caller error."""
    if isinstance(action, ParsedAction):
        return action
    if fmt is None:
        raise EnvUsageError("step() got model text but no format: pass format= or make the env with action_format=")
    return parse_action(action, format=fmt, screen=screen)


def begin_step(
    last: Observation | None,
    done: bool,
    action: ParsedAction | str,
    fmt: str | None,
    translate: Callable[[ParsedAction], T],
) -> tuple[ParsedAction, T] | StepResult:
    """The checks every `step()` opens with: none before reset, nothing done once the episode is over, model text
    parsed, and an invalid output (or one `translate` rejects with ValueError) answered without touching the desktop.
    Returns that answer, or the parsed action and its translation for the env to send."""
    if last is None:
        raise EnvUsageError("step() before reset()")
    if done:
        return StepResult(last, 0.0, True, step_info(action_valid=True, error="episode over; reset() first"))
    parsed = to_parsed(action, fmt, last.screen)
    if not parsed.valid:
        return StepResult(last, 0.0, False, step_info(action_valid=False, error=parsed.error))
    try:
        return parsed, translate(parsed)
    except ValueError as exc:
        return StepResult(last, 0.0, False, step_info(action_valid=False, error=str(exc)))


ENV_REGISTRY: Registry[str | Callable[..., GUIEnv]] = Registry("env", "envs")
ENV_SPECS: dict[str, EnvSpec] = {}


def register_env(name: str, entry_point: str | Callable[..., GUIEnv], spec: EnvSpec | None = None) -> None:
    """Register an env by name with a factory or a lazy `"module:Class"` string (imported on first use), and what
    the start-up checks may read of it (`EnvSpec`)."""
    ENV_REGISTRY.add(name, entry_point)
    ENV_SPECS[name] = spec or ENV_SPECS.get(name) or EnvSpec()


def env_spec(name: str) -> EnvSpec:
    """What env `name` was registered with; an env registered without a spec, or not here, gets the defaults."""
    return ENV_SPECS.get(name) or EnvSpec()


def explicit_screen(kwargs: Mapping[str, Any]) -> tuple[int, int] | None:
    """The screen size an env's kwargs name (`screen` or `screen_size`), if any."""
    screen = kwargs.get("screen") or kwargs.get("screen_size")
    return None if not screen else (int(screen[0]), int(screen[1]))


def env_screen(name: str, kwargs: Mapping[str, Any]) -> tuple[int, int]:
    """The size of the screenshots env `name` built with `kwargs` gives; one-line errors for an unknown env or one
    that does not say."""
    ENV_REGISTRY.lookup(name)
    spec = env_spec(name)
    screen = spec.screen(kwargs) if spec.screen is not None else explicit_screen(kwargs)
    if screen is None:
        raise ValueError(
            f"env {name!r} does not say its screenshots' size: set cua.env.kwargs.screen=[WIDTH,HEIGHT], or register "
            "it with register_env(name, entry_point, EnvSpec(screen=...))"
        )
    return screen


def make_env(name: str, **kwargs) -> GUIEnv:
    """Build the env registered as `name` with `kwargs`; unknown names raise ValueError listing the valid ones."""
    return _entry(name)(**kwargs)


def env_start_timeout(name: str, kwargs: dict[str, Any], pool_size: int, default: float | None) -> float | None:
    """Seconds a pool of `pool_size` should give one start of env `name` built with `kwargs`: what the env's
    `start_timeout_for(pool_size, **kwargs)` asks for, else `default`."""
    asked = getattr(_entry(name), "start_timeout_for", None)
    timeout = None if asked is None else asked(pool_size, **kwargs)
    return default if timeout is None else float(timeout)


def _entry(name: str) -> Callable[..., GUIEnv]:
    entry = ENV_REGISTRY.lookup(name)
    if isinstance(entry, str):
        module_name, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module_name), attr)
    return entry
