"""CODA's judge file: one judgement per episode (`Correctness`, `Redundant`, `First_Error_Step`), read and checked
(`read_judgements`), matched to the run that holds each judged episode (`match_judgements`), and CODA's rule for
which episodes are used (`judged_out`). `verl_cua.sft.recorded_states` (Stage 1) and `verl-cua sft-data
--select judge` both read it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.envs.trajectory import EpisodeRecord

JUDGE_REQUIRED = ("Correctness", "Redundant", "First_Error_Step")


@dataclass(frozen=True)
class Judgement:
    """One episode's judgement in CODA's judge schema, and where it was read."""

    correct: bool
    redundant: tuple[int, ...]
    first_error: int | None
    where: str  # `line N` / `entry N` / `entry 'key'`, for error messages

    @property
    def clean(self) -> bool:
        """CODA's rule: correct, no redundant step and no first error step."""
        return self.correct and not self.redundant and self.first_error is None


def read_judgements(path: str | Path) -> dict[tuple[str | None, str], Judgement]:
    """The judge file as {(run or None, episode key): judgement}; a bad entry raises one ValueError line naming it.

    A `.json` file holds an object {episode key: judgement} or a list of entries; any other file is JSONL, one entry
    per line (blank lines skipped). An entry is an object with `episode` (the episode directory relative to its run
    directory, as `episode_dirs` keys it: `chrome/<task id>`), optionally `run` (only needed when several run
    directories hold that key: a run directory's name or its path) and CODA's judge keys: `Correctness` (true or
    false), `Redundant` (a list of 1-based step numbers, empty when none), `First_Error_Step` (null, "" or a 1-based
    step number); `Correct_Action` and any other key are allowed and not read. E.g.
    `{"episode": "chrome/abc", "Correctness": true, "Redundant": [], "First_Error_Step": null}`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"judge file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    entries: list[tuple[str, Any, str | None]] = []  # (where, entry, key when the file keys it)
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc})") from None
        if isinstance(data, dict):
            entries = [(f"entry {key!r}", value, key) for key, value in data.items()]
        elif isinstance(data, list):
            entries = [(f"entry {i}", value, None) for i, value in enumerate(data, 1)]
        else:
            raise ValueError(f"{path}: a .json judge file holds an object {{episode: judgement}} or a list of entries")
    else:
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append((f"line {i}", json.loads(line), None))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {i}: not JSON ({exc.msg})") from None
    out: dict[tuple[str | None, str], Judgement] = {}
    for where, entry, key in entries:
        run, episode, judgement = _judgement(entry, key, path, where)
        if (run, episode) in out:
            raise ValueError(f"{path}: {where}: episode {episode!r} is judged twice (also {out[run, episode].where})")
        out[run, episode] = judgement
    return out


def _judgement(entry: Any, key: str | None, path: Path, at: str) -> tuple[str | None, str, Judgement]:
    """(run, episode, judgement) of one entry; a ValueError line naming the file, `at` and the bad field otherwise."""
    where = f"{path}: {at}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a judgement is a JSON object, got {type(entry).__name__}")
    episode = key if key is not None else entry.get("episode")
    parts = Path(episode).parts if isinstance(episode, str) else ()
    if not parts or Path(episode).is_absolute() or ".." in parts:
        raise ValueError(f"{where}: 'episode' must be an episode directory relative to its run dir, got {episode!r}")
    run = entry.get("run")
    if run is not None and not (isinstance(run, str) and run):
        raise ValueError(f"{where}: 'run' must be a run directory's name or path, got {run!r}")
    missing = [k for k in JUDGE_REQUIRED if k not in entry]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}; a judgement has {', '.join(JUDGE_REQUIRED)}")
    correct = entry["Correctness"]
    if not isinstance(correct, bool):
        raise ValueError(f"{where}: Correctness must be true or false, got {correct!r}")
    redundant = entry["Redundant"]
    if not isinstance(redundant, list) or not all(_step_number(s) for s in redundant):
        raise ValueError(f"{where}: Redundant must be a list of 1-based step numbers, got {redundant!r}")
    first = entry["First_Error_Step"]
    if first is not None and first != "" and not _step_number(first):
        raise ValueError(f'{where}: First_Error_Step must be null, "" or a 1-based step number, got {first!r}')
    first = None if first in (None, "") else int(first)
    return run, episode.strip("/"), Judgement(correct, tuple(redundant), first, at)


def _step_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def match_judgements(
    judgements: dict[tuple[str | None, str], Judgement], runs: dict[Path, dict[str, EpisodeRecord]], path: str
) -> dict[tuple[Path, str], Judgement]:
    """Each judgement on the one (run, episode) it names; a judged episode found in no run, or in several without
    `run`, raises a ValueError line."""
    out: dict[tuple[Path, str], Judgement] = {}
    for (run, key), judgement in judgements.items():
        holders = [r for r, episodes in runs.items() if key in episodes and (run is None or _is_run(run, r))]
        if not holders:
            named = f" of run {run!r}" if run is not None else ""
            raise ValueError(f"{path}: {judgement.where}: episode {key!r}{named} is in none of the runs "
                             f"({', '.join(str(r) for r in runs)})")  # fmt: skip
        if len(holders) > 1:
            raise ValueError(f"{path}: {judgement.where}: episode {key!r} is in several runs "
                             f"({', '.join(str(r) for r in holders)}); add \"run\" to say which")  # fmt: skip
        if (holders[0], key) in out:
            raise ValueError(f"{path}: {judgement.where}: episode {key!r} of {holders[0]} is judged twice")
        out[holders[0], key] = judgement
    return out


def _is_run(name: str, run: Path) -> bool:
    return name == run.name or Path(os.path.abspath(name)) == run


def judged_out(record: EpisodeRecord, labels: str, judgement: Judgement | None) -> str | None:
    """Why an episode is left out under `labels` (`success`, or `judge`: CODA's rule on `judgement`), else None."""
    if record.status in ("unfinished", "infra_failure"):
        return record.status
    if labels == "success":
        return None if record.status == "success" else "not a success"
    if judgement is None:
        return "not judged"
    if not judgement.correct:
        return "judged not correct"
    if judgement.redundant:
        return "judged with redundant steps"
    return None if judgement.first_error is None else "judged with a first error step"
