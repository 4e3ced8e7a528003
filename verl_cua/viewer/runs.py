"""Runs as the viewer and `compare` see them: a name, `run.json`, episodes by task key, and per-run counts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.envs.trajectory import EpisodeRecord, read_run

MISSING = "missing"  # the task has no episode directory in this run


@dataclass
class Run:
    """One run directory read back: display name, `run.json` (empty for trainer traces) and its episodes."""

    name: str
    dir: Path
    meta: dict[str, Any]
    episodes: dict[str, EpisodeRecord]

    def status(self, key: str) -> str:
        """success | failure | infra_failure | unfinished | missing."""
        episode = self.episodes.get(key)
        return episode.status if episode is not None else MISSING

    def counts(self) -> dict[str, int]:
        """Episodes per status, plus `tasks` (all episodes) and `scored` (successes + failures)."""
        out = {"tasks": len(self.episodes), "success": 0, "failure": 0, "infra_failure": 0, "unfinished": 0}
        for episode in self.episodes.values():
            out[episode.status] = out.get(episode.status, 0) + 1
        out["scored"] = out["success"] + out["failure"]
        return out

    def success_rate(self) -> float | None:
        """Successes over scored episodes; infra failures and unfinished episodes are not counted; None if none."""
        counts = self.counts()
        return counts["success"] / counts["scored"] if counts["scored"] else None


def load_run(run_dir: str | Path) -> Run:
    """Read a run directory (an eval run or a trainer trace directory without `run.json`)."""
    root = Path(run_dir)
    meta, episodes = read_run(root)
    meta = meta if isinstance(meta, dict) else {}
    for episode in episodes.values():  # a line that is JSON but not an object shows as an empty step
        episode.steps = [step if isinstance(step, dict) else {} for step in episode.steps]
    name = str(meta.get("name") or root.resolve().name)
    return Run(name=name, dir=root, meta=meta, episodes=episodes)


def load_runs(run_dirs: list[str | Path]) -> list[Run]:
    """Read several runs; equal display names get their parent directory prepended (then a counter)."""
    runs = [load_run(d) for d in run_dirs]
    names = [run.name for run in runs]
    for run in runs:
        if names.count(run.name) > 1 and not run.meta.get("name"):
            run.name = f"{run.dir.resolve().parent.name}/{run.name}"
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.name] = seen.get(run.name, 0) + 1
        if seen[run.name] > 1:
            run.name = f"{run.name} ({seen[run.name]})"
    return runs


def split_key(key: str) -> tuple[str, str]:
    """(domain, task id) of an episode key: the last path part is the id, everything before it the domain."""
    domain, _, task_id = key.rpartition("/")
    return domain, task_id


def task_keys(runs: list[Run]) -> list[str]:
    """The union of the runs' episode keys, sorted by domain, then task id."""
    keys = {key for run in runs for key in run.episodes}
    return sorted(keys, key=lambda k: split_key(k))


def instruction(runs: list[Run], key: str) -> str:
    """The task's instruction from the first run whose `result.json` has one ("" if none does)."""
    return episode_instruction(run.episodes.get(key) for run in runs)


def episode_instruction(episodes: Iterable[EpisodeRecord | None]) -> str:
    """The instruction of the first of `episodes` whose `result.json` has one ("" if none does)."""
    return next((str(e.result["instruction"]) for e in episodes if e and e.result and e.result.get("instruction")), "")


def step_valid(step: dict[str, Any]) -> bool | None:
    """Whether a step record's action was valid: its own `valid`, else its parsed action's (None if neither says)."""
    if step.get("valid") is not None:
        return step["valid"]
    action = step.get("action")
    return action.get("valid") if isinstance(action, dict) else None


def step_advantage(episode: EpisodeRecord, index: int) -> float | None:
    """Step `index`'s (0-based) advantage: its own `advantage`, else `result.json`'s `step_advantages`."""
    value = episode.steps[index].get("advantage")
    if value is None and episode.result:
        advantages = episode.result.get("step_advantages") or []
        if index < len(advantages):
            value = advantages[index]
    return value
