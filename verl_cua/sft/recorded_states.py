"""CODA Stage-1 rows: recorded episodes become one verl row per recorded state, labelled with its target action.

CODA (arXiv 2508.20096) trains its planner with step-level GRPO on recorded states, with no desktop at training
time: a state is the task instruction, the text history of the earlier steps and the previous and current
screenshot; the executor's action is scored against the state's labelled target `a_T`
(`verl_cua.actions.planner.reward`). `python -m verl_cua.sft.recorded_states RUN_DIR ... --labels success|judge
[--judge FILE] --out rows.parquet|rows.jsonl` writes them.

Choices this module makes:

* Episodes are read with `verl_cua.envs.trajectory.read_run` (an `episodes.json` index and hidden directories are
  honoured as the viewer honours them); unfinished and `infra_failure` episodes are never used.
* `labels="success"`: episodes whose status is `success` (the status the eval harness and the trainer's trace decide
  with their success threshold). Every valid step is labelled with its own executed action, as CODA labels every
  action of a clean successful trajectory; redundant steps are kept, since without a judge nothing says which they
  are. `labels="judge"`: the judge file decides (format: `verl_cua.sft.judge.read_judgements`).
* A step is a state when it is valid (the `valid` flag, as `verl-cua sft-data` keeps steps) and has a GUI action; an
  invalid step is no state but stays in the later states' history. A step of several actions is labelled with its
  first (what the desktop ran first; the step reward scores a prediction's first action too).
* `history`: (the step's thought, else its model text; its action as pyautogui text, or `invalid: <error>`) for the
  earlier steps, the last `max_history` of them. `screenshots`: absolute paths of the previous step's screenshot
  (None at the first step) and of this step's; `screen` is the actions' pixel space (a training trace keeps the
  resized image the model got, so an image may be smaller than `screen`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.actions.formats.base import describe
from verl_cua.actions.render import render_pyautogui
from verl_cua.actions.types import GUIAction
from verl_cua.envs.observation import Element, table_elements
from verl_cua.envs.trajectory import RUN, EpisodeRecord, read_run, write_atomic
from verl_cua.sft.episodes import task_names
from verl_cua.sft.judge import judged_out, match_judgements, read_judgements

LABELS = ("success", "judge")
DATA_SOURCE = "recorded_states"  # verl reports validation per data source: val-core/recorded_states/...
OUT_SUFFIXES = (".parquet", ".jsonl")


@dataclass(frozen=True)
class RecordedState:
    """One recorded state of an episode with its labelled target action (CODA's `a_T`)."""

    task: str  # the task as the result records it (`sft.episodes.task_names`: eval `chrome/<id>`, a trace's task dir)
    env: str
    instruction: str
    step: int  # 1-based, as the trajectory numbers it
    history: tuple[tuple[str, str], ...]  # (thought or model text, executed action text) of the earlier steps
    screenshots: tuple[str | None, str]  # absolute paths: the previous screen (None at step 1), the current one
    screen: tuple[int, int]  # the actions' pixel space (width, height)
    target: dict[str, Any]  # `GUIAction.to_dict()` of the step's executed action
    label_source: str  # success | judge
    episode: str  # the episode directory (absolute)
    elements: tuple[dict[str, Any], ...] = ()  # the screen's elements, where the step read a table (boxes in pixels)
    target_box: tuple[int, int, int, int] | None = None  # x1, y1, x2, y2 of the smallest element the target points in
    elements_text: str = ""  # the table or marks the step read, as the planner is shown them ("" for screenshots)


# -------------------------------------------------------------------------------------------------------- states


def recorded_states(
    run_dirs: list[str | Path], *, labels: str = "success", judge_file: str | Path | None = None, max_history: int = 15
) -> list[RecordedState]:
    """The labelled recorded states of the runs' episodes (module docstring: which episodes and steps)."""
    return collect_states(run_dirs, labels=labels, judge_file=judge_file, max_history=max_history)[0]


def collect_states(
    run_dirs: list[str | Path], *, labels: str = "success", judge_file: str | Path | None = None, max_history: int = 15
) -> tuple[list[RecordedState], Counter[str]]:
    """`recorded_states` and what was left out (`episode: <why>` / `step: <why>` -> count)."""
    if labels not in LABELS:
        raise ValueError(f"unknown labels {labels!r}; valid: {', '.join(LABELS)}")
    if labels == "judge" and judge_file is None:
        raise ValueError("labels=judge needs a judge file (--judge FILE)")
    if labels == "success" and judge_file is not None:
        raise ValueError("a judge file is read only with labels=judge")
    if max_history < 0:
        raise ValueError(f"max_history must be 0 or more, got {max_history}")
    if not run_dirs:
        raise ValueError("no run directory given")
    runs: dict[Path, dict[str, EpisodeRecord]] = {}
    metas: dict[Path, dict[str, Any]] = {}
    for run_dir in run_dirs:
        root = Path(os.path.abspath(run_dir))
        meta, episodes = read_run(root)  # a missing run directory raises FileNotFoundError, one line
        if not episodes:
            raise ValueError(f"run directory {run_dir} holds no episode (no trajectory.jsonl below it)")
        runs[root], metas[root] = episodes, meta
    judged = match_judgements(read_judgements(judge_file), runs, str(judge_file)) if labels == "judge" else {}
    states: list[RecordedState] = []
    skipped: Counter[str] = Counter()
    for root, episodes in runs.items():
        for key, record in episodes.items():
            why = judged_out(record, labels, judged.get((root, key)))
            if why is None:
                found = _episode_states(record, root, metas[root], labels, max_history, skipped)
                why = None if found else "no valid step"
                states += found
            if why is not None:
                skipped[f"episode: {why}"] += 1
    return states, skipped


def _episode_states(
    record: EpisodeRecord, root: Path, meta: dict[str, Any], labels: str, max_history: int, skipped: Counter[str]
) -> list[RecordedState]:
    """The states of one selected episode; a missing screenshot or screen size raises a ValueError line."""
    result = record.result or {}
    task = task_names(result, record.key)[0]
    env = str(result.get("env") or meta.get("env") or _trace_env(record.dir, root) or "unknown")
    instruction = str(result.get("instruction") or "")
    states, history = [], []
    previous: str | None = None
    for i, line in enumerate(record.steps):
        step = int(line.get("step") or i + 1)
        current = _shot(record, line, step)
        action = line.get("action") or {}
        actions = action.get("actions") or []
        try:
            done = action_text(line)
            target = GUIAction.from_dict(actions[0]).to_dict() if line.get("valid") and actions else None
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"{record.dir}: step {step}: unreadable action ({exc})") from None
        if target is None:
            skipped["step: invalid" if not line.get("valid") else "step: no GUI action (raw code)"] += 1
        else:
            screen = line.get("screen") or ()
            if len(screen) != 2:
                raise ValueError(f"{record.dir}: step {step} has no screen size (`screen` in its trajectory line)")
            table = line.get("elements_text") or ""
            elements = table_elements(table)
            boxed = [] if "[cut at the " in table else elements  # a cut table may have lost the target's own row
            states.append(RecordedState(
                task=task, env=env, instruction=instruction, step=step,
                history=tuple(history[-max_history:] if max_history else ()),
                screenshots=(previous, current), screen=(int(screen[0]), int(screen[1])), target=target,
                label_source=labels, episode=str(record.dir),
                elements=tuple(_element_dict(e) for e in elements),
                target_box=target_box(target, boxed, (int(screen[0]), int(screen[1]))),
                elements_text=table,
            ))  # fmt: skip
        history.append((str(action.get("thought") or line.get("model_text") or ""), done))
        previous = current
    return states


MAX_BOX_SHARE = 0.1  # a labelled click's element box covers at most this share of the screen
POINTER_KINDS = frozenset({"click", "double_click", "triple_click", "right_click", "middle_click", "move"})


def target_box(
    target: dict[str, Any], elements: list[Element], screen: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """The box (x1, y1, x2, y2) of the smallest element a pointer target lands in: a click anywhere on that element
    is the labelled click (CODA's IoU for boxes); None for other kinds, when no element holds the point, or when
    the smallest is a container (over `MAX_BOX_SHARE` of the screen: any click in a panel is no exact hit)."""
    x, y = target.get("x"), target.get("y")
    if target.get("kind") not in POINTER_KINDS or x is None or y is None:
        return None
    cap = MAX_BOX_SHARE * screen[0] * screen[1]
    holding = [e for e in elements if e.box[0] <= x < e.box[0] + e.box[2] and e.box[1] <= y < e.box[1] + e.box[3]
               and e.box[2] * e.box[3] <= cap]  # fmt: skip
    if not holding:
        return None
    bx, by, bw, bh = min(holding, key=lambda e: e.box[2] * e.box[3]).box
    return bx, by, bx + bw - 1, by + bh - 1


def _element_dict(element: Element) -> dict[str, Any]:
    return {"tag": element.tag, "box": list(element.box), "name": element.name, "text": element.text,
            "id": element.id, "classes": element.classes}  # fmt: skip


def _shot(record: EpisodeRecord, line: dict[str, Any], step: int) -> str:
    """The absolute path of a step's screenshot; a ValueError line when the trajectory names none or it is gone."""
    name = line.get("screenshot")
    if not name:
        raise ValueError(f"{record.dir}: step {step} names no screenshot")
    path = record.dir / str(name)
    if not path.is_file():
        raise ValueError(f"{record.dir}: step {step}: screenshot {path} is missing")
    return str(path)


def _trace_env(directory: Path, root: Path) -> str | None:
    """The `env` of the nearest `run.json` between an episode and its run directory (a training trace's step)."""
    for parent in directory.parents:
        if not parent.is_relative_to(root):
            return None
        path = parent / RUN
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8")).get("env")
            except (OSError, ValueError, AttributeError):
                return None
    return None


def action_text(line: dict[str, Any]) -> str:
    """A step's executed action as text: pyautogui code (`describe` for what it cannot say), or `invalid: <why>`."""
    action = line.get("action") or {}
    if not line.get("valid"):
        return f"invalid: {line.get('error') or action.get('error') or 'no action'}"
    if action.get("code"):
        return str(action["code"])
    actions = [GUIAction.from_dict(a) for a in action.get("actions") or []]
    try:
        return render_pyautogui(actions)
    except ValueError:  # an api call, an unusual key: the short form
        return "; ".join(describe(a) for a in actions)


# ---------------------------------------------------------------------------------------------------------- rows


def state_rows(
    states: list[RecordedState], *, data_source: str = DATA_SOURCE, agent_name: str = "gui_agent"
) -> list[dict[str, Any]]:
    """verl parquet rows (as `integrations.verl.dataset` lays out task rows), JSON-serialisable, numbered in order."""
    rows = []
    for index, s in enumerate(states):
        coda_state = {
            "instruction": s.instruction,
            "step": s.step,
            "history": [list(entry) for entry in s.history],
            "screenshots": {"previous": s.screenshots[0], "current": s.screenshots[1]},
            "screen": list(s.screen),
            "label_source": s.label_source,
            "episode": s.episode,
            "elements": list(s.elements),
            "target_box": list(s.target_box) if s.target_box else None,
            "elements_text": s.elements_text,
        }
        rows.append({
            "data_source": data_source,
            "prompt": [{"role": "user", "content": f"{s.task} step {s.step}"}],
            "agent_name": agent_name,
            "ability": "computer_use",
            "reward_model": {"style": "rule", "ground_truth": json.dumps(s.target)},
            "extra_info": {"task": s.task, "env": s.env, "index": index, "coda_state": coda_state},
        })  # fmt: skip
    return rows


def write_rows(rows: list[dict[str, Any]], out: str | Path) -> tuple[Path, str | None]:
    """Write `.parquet` (pandas and pyarrow) or `.jsonl`; without pandas/pyarrow a `.parquet` request is written as
    `.jsonl` beside it. Returns (the path written, the one-line note when that happened)."""
    out = Path(out)
    if out.suffix not in OUT_SUFFIXES:
        raise ValueError(f"--out {out}: unknown suffix; valid: {', '.join(OUT_SUFFIXES)}")
    note = None
    if out.suffix == ".parquet":
        try:
            import pandas as pd
            import pyarrow  # noqa: F401  (pandas' parquet engine)
        except ImportError:
            from verl_cua.resources import install_hint

            out = out.with_suffix(".jsonl")
            note = f"parquet needs pandas and pyarrow ({install_hint('verl')}); wrote {out} instead"
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(rows).to_parquet(out)
            return out, None
    write_atomic(out, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8"))
    return out, note


def summary(states: list[RecordedState], runs: int, skipped: Counter[str], out: Path) -> str:
    """The CLI's one line: N states from M episodes of K runs, where they went, and what was skipped."""
    episodes = len({s.episode for s in states})
    left = ", ".join(f"{n} {why.replace(':', '', 1)}" for why, n in sorted(skipped.items())) or "none"
    return f"{len(states)} states from {episodes} episodes of {runs} runs -> {out}; skipped: {left}"


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: recorded runs -> CODA step rows; bad input is one line on stderr and exit 2."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="eval run directories or training trace directories")
    ap.add_argument("--labels", default="success", choices=LABELS, help="success: successful episodes' steps; "
                    "judge: episodes the judge file calls clean (CODA's rule)")  # fmt: skip
    ap.add_argument("--judge", default=None, metavar="FILE", help="the judge file (JSONL or JSON; see read_judgements)")
    ap.add_argument("--out", required=True, help="rows.parquet or rows.jsonl")
    ap.add_argument("--max-history", type=int, default=15, help="earlier steps kept in a state's text history")
    ap.add_argument("--data-source", default=DATA_SOURCE)
    ap.add_argument("--agent-name", default="gui_agent", help="the agent loop verl runs the rows with")
    args = ap.parse_args(argv)
    name = "verl-cua recorded-states"
    try:
        states, skipped = collect_states(args.runs, labels=args.labels, judge_file=args.judge,
                                         max_history=args.max_history)  # fmt: skip
        if not states:
            left = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
            raise ValueError(f"no state was selected (--labels {args.labels}); skipped: {left}")
        rows = state_rows(states, data_source=args.data_source, agent_name=args.agent_name)
        out, note = write_rows(rows, args.out)
    except (ValueError, OSError) as exc:  # FileNotFoundError is an OSError
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    if note:
        print(f"{name}: {note}", file=sys.stderr)
    print(summary(states, len(args.runs), skipped, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
