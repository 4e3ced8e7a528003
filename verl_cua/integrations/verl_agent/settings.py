"""`env.<osworld|miniwob>.*`: our keys in verl-agent's config, read beside its own `env.*` (max_steps, seed, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from verl_cua.actions.formats import get_format, trainable_formats
from verl_cua.actions.geometry import QWEN25VL_RESIZE
from verl_cua.envs import ENV_REGISTRY, observed_kwargs
from verl_cua.envs.observation import DEFAULT_BUDGET

BACKENDS = ("thread", "ray")
# What a sampled task becomes when the dataset gives none (seeds for MiniWoB, as verl-agent's own envs draw).
TRAIN_SEEDS = (0, 2**16 - 1)
VAL_SEEDS = (2**16, 2**31 - 1)


@dataclass(frozen=True)
class EnvSettings:
    """One env section (`+env.osworld.tasks=...` on verl-agent's command line); every key has a default but
    OSWorld's `tasks`."""

    tasks: str | None = None  # task names / JSON files / folders / OSWorld meta files (as `verl-cua eval --tasks`)
    val_tasks: str | None = None  # default: `tasks`
    kwargs: dict[str, Any] = field(default_factory=dict)  # verl_cua.envs.make_env(name, **kwargs)
    format: str = "qwen25vl"  # how model text is parsed: a trainable format (qwen25vl, qwen3vl, uitars, pyautogui, ...)
    max_pixels: int = 1003520  # screenshots are resized to at most this many pixels (1280 Qwen2.5-VL tokens)
    success_threshold: float = 1.0  # evaluator score >= this sets info['won']
    history_chars: int = 400  # each earlier model output in the text history is cut to this many characters
    pool_backend: str = "thread"  # thread: envs in this process | ray: one Ray actor per env, on `hosts`
    hosts: list[str] | None = None
    reset_timeout: float = 120.0
    step_timeout: float = 60.0
    evaluate_timeout: float = 120.0
    observation: str = "screenshot"  # what the model reads each turn: one of OSWorld's observation types
    observation_tokens: int = DEFAULT_BUDGET  # tokens of element table or marks a turn may show

    def env_kwargs(self, name: str) -> dict[str, Any]:
        """What `make_env(name, ...)` is given: `kwargs` with the observation type (one line if env `name` lacks it)."""
        return observed_kwargs(name, self.kwargs, self.observation, self.observation_tokens)

    @property
    def factor(self) -> int:
        """Pixels per merged vision token side of the model the format belongs to (its spec's `resize`: Qwen3-VL
        32); a format of no one model family (pyautogui, api_gui) trains Qwen2.5-VL's grid (28)."""
        return int((get_format(self.format).resize or QWEN25VL_RESIZE)["factor"])


def env_name(config_env_name: str) -> str | None:
    """Which of our envs `env.env_name` names (`osworld`, `miniwob/click-test`, ...), or None."""
    head = str(config_env_name).lower().split("/", 1)[0]
    return head if head in ENV_REGISTRY.valid() else None


def read_settings(name: str, section: Mapping[str, Any] | None) -> EnvSettings:
    """The settings of env `name` from its config section; unknown keys or values fail in one line naming the
    valid ones."""
    raw = _plain(section) or {}
    valid = [f.name for f in fields(EnvSettings)]
    unknown = sorted(set(raw) - set(valid))
    if unknown:
        raise ValueError(f"unknown key(s) env.{name}.{', '.join(unknown)}; valid keys: {', '.join(valid)}")
    settings = EnvSettings(**raw)
    if settings.format not in trainable_formats():
        valid = ", ".join(trainable_formats())
        raise ValueError(f"unknown env.{name}.format {settings.format!r}; valid formats: {valid}")
    if settings.pool_backend not in BACKENDS:
        raise ValueError(
            f"unknown env.{name}.pool_backend {settings.pool_backend!r}; valid backends: {', '.join(BACKENDS)}"
        )
    tasks = settings.tasks if settings.tasks is not None else ENV_REGISTRY.lookup(name).default_tasks
    if not tasks:
        raise ValueError(f"env.{name}.tasks is required: task JSON files, folders or OSWorld meta files")
    if not isinstance(settings.kwargs, Mapping):
        raise ValueError(f"env.{name}.kwargs must be a mapping, got {type(settings.kwargs).__name__}")
    try:
        settings.env_kwargs(name)
    except ValueError as exc:
        raise ValueError(f"env.{name}.observation: {exc}") from None
    if int(settings.max_pixels) < 256 * 256:
        raise ValueError(f"env.{name}.max_pixels must be at least 65536 (verl-agent upsizes smaller images)")
    return EnvSettings(**{**raw, "tasks": _task_text(tasks), "val_tasks": _task_text(settings.val_tasks or tasks)})


def _task_text(tasks: str | list[str]) -> str:
    return tasks if isinstance(tasks, str) else ",".join(str(t) for t in tasks)


def _plain(value: Any) -> Any:
    """OmegaConf containers -> plain dicts/lists (resolved); anything else as it is."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - verl-agent always brings omegaconf
        return value
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value
