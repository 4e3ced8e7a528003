"""The on-disk episode record: `trajectory.jsonl` (one line per step), the screenshots, and `result.json`.

Written by `verl-cua eval` and by the trainer's trace dump (`cua.trace.dir`); read by `verl-cua view` and
`verl-cua compare`. A run directory holds `run.json` (what was run) and one episode directory per task,
`<domain>/<task id>/`; any directory with a `trajectory.jsonl` below a run directory is an episode (unless an index
or a hidden directory above it says otherwise: see below).

A step line: `step` (1-based), `screenshot` (the screen the model acted on, relative to the episode directory: eval
keeps the full screenshot, training traces the resized image the model got), `screen`
(the pixel space of the actions), `model_text` (the raw model output; Anthropic replies: their content blocks as
JSON), `action` (`ParsedAction.to_dict()`), `valid`, `error`, `env_error`, `infra_failure`, `reward` (the env's
step reward), `advantage` (training traces), `timing` (`model_s`, `env_s`), `usage` (`prompt_tokens`,
`completion_tokens` when the endpoint reports them), `response` (the endpoint's raw reply, eval only), `prompt` (what
the model was shown, `prompt_record`: `layout`, `messages`, `history_images`), `executor` (planner mode only, else
null: `outcome` action | answer | rejected | unavailable, the executor's `raw` reply, the `executed` action line the
planner's history shows, `kind`, `model`, `seconds`, `attempts`, `error`; `action.thought` is the planner's thought).
Training traces write `advantage` later than the step lines: the trainer puts each step's advantage into
`result.json` as `step_advantages` (one per step, null for a step row it did not see).

Crash safety: every file but `trajectory.jsonl` is written atomically (a temporary file in the same directory,
fsync, rename), so a kill leaves the old file or none, never half of one; `trajectory.jsonl` is append-only and a
torn last line is dropped. An episode is complete once its `result.json` exists (written last); one without is
`unfinished`. A training trace step directory gets `episodes.json` (the index of its complete episodes) once the
trainer has written their advantages: readers then list exactly those, so a step re-run after a resume, or episodes
cut off by a kill, never show twice or as results.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

logger = logging.getLogger(__name__)
TRAJECTORY = "trajectory.jsonl"
RESULT = "result.json"
RUN = "run.json"
INDEX = "episodes.json"
STATUSES = ("success", "failure", "infra_failure")
STEP_KEYS = (
    "step",
    "screenshot",
    "screen",
    "model_text",
    "action",
    "valid",
    "error",
    "env_error",
    "infra_failure",
    "reward",
    "advantage",
    "timing",
    "usage",
    "response",
    "prompt",
    "api_result",
    "focused_app",
    "elements_text",  # the element table or marks the step read (an observation type other than `screenshot`)
    "executor",  # planner mode (CODA): what the executor did with the planner's thought (`model_text` is the plan)
)


def step_record(**fields: Any) -> dict[str, Any]:
    """A trajectory line with every key of the format (missing ones None); unknown keys are a caller bug."""
    unknown = sorted(set(fields) - set(STEP_KEYS))
    if unknown:
        raise ValueError(f"unknown trajectory step keys {', '.join(unknown)}; valid: {', '.join(STEP_KEYS)}")
    record = dict.fromkeys(STEP_KEYS)
    record.update(fields)
    if record["screen"] is not None:
        record["screen"] = [int(v) for v in record["screen"]]
    return record


def prompt_record(
    messages: list[dict[str, Any]],
    image_name: Callable[[Any], str | None],
    *,
    layout: str = "step",
    history_images: int | None = None,
) -> dict[str, Any]:
    """A step's `prompt` field: the chat `messages` with their text as is and each image part as the name of its
    screenshot file in the episode directory (`image_name(image)`; no image is written twice). `layout`: `step` (the
    messages are the whole prompt) or `episode` (after the first step, the messages added after the previous step's
    prompt and its reply, which that step's `model_text` holds); `history_images`: only the last N images of the
    conversation were sent (None: all)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [
                {"type": "image", "screenshot": image_name(part.get("image"))}
                if part.get("type") == "image"
                else {"type": "text", "text": str(part.get("text") or "")}
                for part in content
                if isinstance(part, dict)
            ]
        else:
            content = "" if content is None else str(content)
        out.append({"role": str(message.get("role")), "content": content})
    return {"layout": layout, "messages": out, "history_images": history_images}


def screenshot_name(index: int) -> str:
    """File name of the `index`-th screenshot of an episode (0: after reset)."""
    return f"step_{index:03d}.png"


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file atomically: a temporary file in the same directory, fsync, rename (a crash leaves the old file
    or none, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide results from whoever the run is shared with
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a reader never sees half a file; a crash leaves the old file or none)."""
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=1, default=str).encode("utf-8"))


class EpisodeWriter:
    """Writes one episode directory: screenshots, one JSON line per step (flushed as it goes), then `result.json`."""

    def __init__(self, directory: str | Path, *, fresh: bool = True):
        self.dir = Path(directory)
        if fresh and self.dir.exists():
            shutil.rmtree(self.dir)  # a half-written attempt (crash, infra retry) is replaced, never appended to
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lines = open(self.dir / TRAJECTORY, "a", encoding="utf-8")  # closed by finish() / close()

    def screenshot(self, index: int, image: Image.Image | bytes) -> str:
        """Save the `index`-th screenshot (an image, or PNG bytes already encoded); returns its file name."""
        name = screenshot_name(index)
        if not isinstance(image, bytes):
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", compress_level=3)
            image = buffer.getvalue()
        write_atomic(self.dir / name, image)
        return name

    def step(self, record: dict[str, Any]) -> None:
        """Append one step line."""
        self._lines.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._lines.flush()

    def finish(self, result: dict[str, Any]) -> None:
        """Write `result.json` (the episode is complete once it exists) and close the trajectory."""
        status = result.get("status")
        if status not in STATUSES:
            raise ValueError(f"episode status {status!r} is not valid; valid: {', '.join(STATUSES)}")
        if not self._lines.closed:
            self._lines.flush()
            os.fsync(self._lines.fileno())  # the steps are on disk before the result that says they are complete
        self.close()
        write_json(self.dir / RESULT, result)

    def close(self) -> None:
        """Close the trajectory file (idempotent)."""
        if not self._lines.closed:
            self._lines.close()


@dataclass
class EpisodeRecord:
    """One episode read back: its key in the run, `result.json` (None if unfinished) and the step lines."""

    key: str
    dir: Path
    result: dict[str, Any] | None
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """success | failure | infra_failure, or `unfinished` when there is no result yet."""
        return (self.result or {}).get("status", "unfinished")


def read_result(directory: str | Path) -> dict[str, Any] | None:
    """An episode's `result.json`, or None while it is unfinished (no trajectory lines are read)."""
    path = Path(directory) / RESULT
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _readable_result(directory: Path) -> dict[str, Any] | None:
    """`read_result`, or None (the episode shows as unfinished) when `result.json` is not a JSON object."""
    try:
        result = read_result(directory)
    except (OSError, ValueError) as exc:
        logger.warning("%s: unreadable, the episode counts as unfinished: %s", directory / RESULT, exc)
        return None
    return result if isinstance(result, dict) or result is None else None


def read_episode(directory: str | Path, key: str | None = None) -> EpisodeRecord:
    """Read an episode directory; a torn last line (a crash mid-write) is dropped, other bad lines raise."""
    directory = Path(directory)
    steps: list[dict[str, Any]] = []
    path = directory / TRAJECTORY
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            steps.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}: line {i + 1} is not JSON") from None
    return EpisodeRecord(key=key or directory.name, dir=directory, result=_readable_result(directory), steps=steps)


def episode_dirs(run_dir: str | Path) -> dict[str, Path]:
    """Every episode directory below `run_dir`, keyed by its path relative to it (`calc/calc-sum-column`). Below a
    directory with an index (`episodes.json`: a finished training trace step), exactly the episodes it lists; hidden
    directories (`.abandoned/`, where a resume moves the steps a crash lost) are not part of the run."""
    root = Path(run_dir)
    found = {}
    for current, subdirs, files in os.walk(root):
        here = Path(current)
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        indexed = read_index(here) if INDEX in files else None
        if indexed is not None:
            subdirs.clear()  # the index says which episodes below are the step's
            for key in indexed:
                if (here / key).is_dir():
                    found[(here / key).relative_to(root).as_posix()] = here / key
        elif TRAJECTORY in files:
            found[here.relative_to(root).as_posix()] = here
    return dict(sorted(found.items(), key=lambda item: item[1]))  # by path, as the parts compare


def write_index(run_dir: str | Path, keys: list[str]) -> None:
    """Write `episodes.json`: the complete episodes of a run directory (keys relative to it), written last."""
    unsafe = [k for k in keys if not _inside(k)]
    if unsafe:
        raise ValueError(f"index keys must be relative paths inside the run directory, got {', '.join(unsafe)}")
    write_json(Path(run_dir) / INDEX, {"episodes": sorted(dict.fromkeys(keys))})


def read_index(run_dir: str | Path) -> list[str] | None:
    """The episode keys of a run directory's `episodes.json`, or None when it has none (or an unreadable one)."""
    path = Path(run_dir) / INDEX
    if not path.is_file():
        return None
    try:
        keys = json.loads(path.read_text(encoding="utf-8"))["episodes"]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError("episodes is not a list of strings")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("%s: unreadable index, every episode directory is listed: %s", path, exc)
        return None
    return [k for k in keys if _inside(k)]


def _inside(key: str) -> bool:
    parts = Path(key).parts
    return bool(parts) and not Path(key).is_absolute() and ".." not in parts


def read_run(run_dir: str | Path) -> tuple[dict[str, Any], dict[str, EpisodeRecord]]:
    """`run.json` (empty if absent) and every episode of a run directory, keyed as in `episode_dirs`."""
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run directory {root} does not exist")
    meta = json.loads((root / RUN).read_text(encoding="utf-8")) if (root / RUN).is_file() else {}
    return meta, {key: read_episode(path, key) for key, path in episode_dirs(root).items()}
