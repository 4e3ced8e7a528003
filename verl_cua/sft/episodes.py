"""The episode-level pieces the SFT builders share (`verl_cua.sft.data`, `verl_cua.sft.planner`,
`verl_cua.sft.recorded_states`): a kept step, a converted episode, an episode's reward and task names, and the
screenshot as the trainer sizes it. Nothing here imports another `verl_cua.sft` module."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from verl_cua.envs import env_spec


@dataclass
class Step:
    """One kept model turn: the screenshot it acted on and its reply in the target format."""

    image: Image.Image
    text: str
    context: str | None = None  # the format's per-turn text beside the screenshot (api_gui: focused app, its APIs)
    read: str | None = None  # the element table or marks the step read (an observation type beyond `screenshot`)


@dataclass
class Candidate:
    """An episode that passed selection, converted to the target format."""

    run: str
    key: str
    task: str  # the task instance (caps apply to it): eval `click-test/seed-0` or `chrome/<id>`, a trace's task dir
    group: str  # what the card counts by: the task (MiniWoB: its name over all seeds)
    source_model: str
    source_format: str
    instruction: str
    screen: tuple[int, int]
    reward: float
    steps: list[Step]
    negatives: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: str = ""
    observation: str = "screenshot"  # what the run's model was shown each turn (OSWorld's type)


def episode_reward(result: dict[str, Any]) -> float:
    """The training reward of a trace, else the evaluator's score (0 when absent)."""
    value = result.get("reward", result.get("score"))
    return float(value) if value is not None else 0.0


def task_names(result: dict[str, Any], key: str) -> tuple[str, str]:
    """(task instance, task group) of an episode: an eval result names its task `<domain>/<task id>`, grouped by its
    domain where the env's tasks run under seeds (`EnvSpec.seeded_tasks`; MiniWoB: `click-test/seed-0` grouped by
    `click-test`); a training trace's task directory holds the task and its seed."""
    if "env" in result:  # written by `verl-cua eval`
        instance = str(result.get("task") or key)
        return instance, str(result.get("domain") or instance) if env_spec(result["env"]).seeded_tasks else instance
    instance = str(result.get("domain") or key)
    return instance, str(result.get("task_id") or instance)


def load_screenshot(path: Path, size: tuple[int, int]) -> Image.Image | None:
    """The screenshot at `path` resized as the trainer resizes it; None when the file is gone."""
    try:
        with Image.open(path) as image:
            shot = image.convert("RGB")
    except (FileNotFoundError, OSError):
        return None
    return shot if shot.size == size else shot.resize(size)
