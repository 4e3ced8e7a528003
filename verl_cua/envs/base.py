"""The `GUIEnv` protocol every desktop speaks, its observation/step types, `begin_step` (the checks every `step()`
opens with), and the env registry behind `make_env`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from PIL import Image

from verl_cua.actions import ParsedAction, parse_action
from verl_cua.envs.observation import check_observation
from verl_cua.envs.spec import EnvSpec
from verl_cua.registry import Registry, resolve, same_definition

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


class TaskUnscorable(RuntimeError):
    """This install cannot score the task (an evaluator package missing, a task file that cannot be staged): the
    episode is masked under a named error and the desktop, which nothing broke, is kept."""


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


def to_parsed(action: ParsedAction | str, fmt: str | None, screen: tuple[int, int], marks: dict | None = None,
              ) -> ParsedAction:  # fmt: skip
    """Model text -> ParsedAction on `screen` (`marks`: the shown screen's set-of-marks centres, for `tag_N`); a
    ParsedAction passes through. No format is a caller error."""
    if isinstance(action, ParsedAction):
        return action
    if fmt is None:
        raise EnvUsageError("step() got model text but no format: pass format= or make the env with action_format=")
    return parse_action(action, format=fmt, screen=screen, marks=marks)


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
    parsed = to_parsed(action, fmt, last.screen, last.extra.get("marks"))
    if not parsed.valid:
        return StepResult(last, 0.0, False, step_info(action_valid=False, error=parsed.error))
    try:
        return parsed, translate(parsed)
    except ValueError as exc:
        return StepResult(last, 0.0, False, step_info(action_valid=False, error=str(exc)))


ENV_REGISTRY: Registry[EnvSpec] = Registry("env", "envs")  # one record per env: entry point and facts


def register_env(name: str, entry_point: str | Callable[..., GUIEnv], spec: EnvSpec | None = None) -> EnvSpec:
    """Register env `name`: its class or factory (or a lazy `"module:Class"` string, imported on first use) and what
    the checks and tools may read of it (`EnvSpec`; registered again without one, the env keeps its record). A
    different entry point under a taken name raises ValueError (one line)."""
    known = ENV_REGISTRY.registered(name)  # registering must not load the plug-ins (they register)
    base = spec or (known if known is not None and same_definition(known.entry_point, entry_point) else EnvSpec())
    return ENV_REGISTRY.add(name, replace(base, name=name, entry_point=entry_point))


def env_spec(name: str) -> EnvSpec:
    """The record of env `name`; an env not registered here gets the defaults."""
    return ENV_REGISTRY.get(name) or EnvSpec(name=name)


def explicit_screen(kwargs: Mapping[str, Any]) -> tuple[int, int] | None:
    """The screen size an env's kwargs name (`screen` or `screen_size`), if any."""
    screen = kwargs.get("screen") or kwargs.get("screen_size")
    return None if not screen else (int(screen[0]), int(screen[1]))


def env_screen(name: str, kwargs: Mapping[str, Any]) -> tuple[int, int]:
    """The size of the screenshots env `name` built with `kwargs` gives; one-line errors for an unknown env or one
    that does not say."""
    spec = ENV_REGISTRY.lookup(name)
    screen = spec.screen(kwargs) if spec.screen is not None else explicit_screen(kwargs)
    if screen is None:
        raise ValueError(
            f"env {name!r} does not say its screenshots' size: set cua.env.kwargs.screen=[WIDTH,HEIGHT], or register "
            "it with register_env(name, entry_point, EnvSpec(screen=...))"
        )
    return screen


def make_env(name: str, **kwargs) -> GUIEnv:
    """Build the env registered as `name` with `kwargs`; unknown names raise ValueError listing the valid ones."""
    return resolve(ENV_REGISTRY.lookup(name).entry_point)(**kwargs)


def env_start_timeout(name: str, kwargs: dict[str, Any], pool_size: int, default: float | None) -> float | None:
    """Seconds a pool of `pool_size` should give one start of env `name` built with `kwargs`: what its record's
    `start_timeout(pool_size, kwargs)` asks for, else `default`."""
    asked = ENV_REGISTRY.lookup(name).start_timeout
    timeout = None if asked is None else resolve(asked)(pool_size, dict(kwargs))
    return default if timeout is None else float(timeout)


def observed_kwargs(name: str, kwargs: Mapping[str, Any], observation: str, tokens: int) -> dict[str, Any]:
    """`kwargs` for env `name` with the observation type a run asked for (`cua.env.observation`, `--observation`):
    unchanged for `screenshot`, else with `observation` and `observation_tokens`; a type the env's record does not
    list is ValueError in one line naming the valid ones."""
    check_observation(observation)
    if observation == "screenshot":
        return dict(kwargs)
    given = env_spec(name).observations
    if observation not in given:
        raise ValueError(f"env {name!r} gives no {observation} observation; it gives: {', '.join(given)}")
    return {**kwargs, "observation": observation, "observation_tokens": int(tokens)}
