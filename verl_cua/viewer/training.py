"""Training traces as the viewer reads them: which runs are traces, their GRPO groups, and each group's rewards.

A trace (`cua.trace.dir`) holds `step_<N>/<task>/<uid>-<session>/` (validation: `val_step_<N>/...`); a group is
the episodes of one training step, task and uid (the `rollout.n` samples of one prompt), its sessions in order.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.envs.trajectory import RUN, EpisodeRecord
from verl_cua.viewer.runs import Run

STEP_DIR = re.compile(r"^(val_)?step_(\d+)$")
EPISODE_KEY = re.compile(r"^(?:(val_)?step_(\d+)/)?(.+)/([^/]+)-(\d+)$")
SCORED = ("success", "failure")  # infra failures leave their group before the estimator runs


@dataclass(frozen=True)
class GroupKey:
    """One GRPO group: the run (its index in the report), the training step, validation or not, task and uid."""

    run: int
    step: int
    validation: bool
    task: str
    uid: str

    @property
    def step_label(self) -> str:
        """`step 3`, or `val step 3` for a validation rollout."""
        return f"{'val ' if self.validation else ''}step {self.step}"

    @property
    def id(self) -> str:
        """A unique string for the group (`0/step_000003/click-test/ab12cd34`)."""
        return f"{self.run}/{'val_' if self.validation else ''}step_{self.step:06d}/{self.task}/{self.uid}"


def _own_step(run: Run) -> tuple[int, bool] | None:
    """The step of a run directory that is one step of a trace (`step_<N>`, or a `run.json` with `global_step`)."""
    match = STEP_DIR.match(run.dir.resolve().name)
    if match:
        return int(match.group(2)), bool(match.group(1))
    step = run.meta.get("global_step")
    return (int(step), False) if isinstance(step, int) else None


def is_training_trace(run: Run) -> bool:
    """Whether every episode of `run` sits where the trainer's trace puts it (a whole trace, or one step of it)."""
    matches = [EPISODE_KEY.match(key) for key in run.episodes]
    if not matches or not all(matches):
        return False
    return all(m.group(2) for m in matches) or _own_step(run) is not None


def session(episode: EpisodeRecord) -> int:
    """The episode's place in its group (`session_id`, the number after the uid)."""
    match = EPISODE_KEY.match(episode.key)
    return int(match.group(5)) if match else 0


def group_episodes(run: Run, index: int) -> dict[GroupKey, list[EpisodeRecord]]:
    """The run's groups in step, then task, then uid order; each group's episodes by session."""
    own = _own_step(run) or (0, False)
    groups: dict[GroupKey, list[EpisodeRecord]] = {}
    for key, episode in run.episodes.items():
        match = EPISODE_KEY.match(key)
        if match is None:
            continue
        val, step, task, uid, _ = match.groups()
        step_no, validation = (int(step), bool(val)) if step else own
        groups.setdefault(GroupKey(index, step_no, validation, task, uid), []).append(episode)
    order = sorted(groups, key=lambda g: (g.validation, g.step, g.task, g.uid))
    return {g: sorted(groups[g], key=session) for g in order}


def reward(episode: EpisodeRecord) -> float | None:
    """The training reward of a scored episode (`reward`, else `score`); None for infra failures and unfinished."""
    result = episode.result or {}
    value = result.get("reward", result.get("score"))
    ok = episode.status in SCORED and isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None


def reward_stats(episodes: list[EpisodeRecord]) -> tuple[float | None, float | None]:
    """Mean and standard deviation (n - 1, as GRPO's `torch.std`) of the group's scored rewards; None when undefined."""
    values = [r for r in map(reward, episodes) if r is not None]
    if not values:
        return None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def trace_meta(run: Run) -> dict[str, Any]:
    """`run.json` of the run, else of its first traced step (model, format, env, estimator), without the step's own
    name and number."""
    if run.meta:
        return run.meta
    for path in sorted(Path(run.dir).glob(f"*step_*/{RUN}")):
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict):
            return {k: v for k, v in meta.items() if k not in ("name", "global_step")}
    return {}
