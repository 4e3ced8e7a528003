"""What a resumed run does to the outputs of the run it continues: verl's metrics file keeps the records of the
steps the checkpoint holds (verl's file logger truncates the file when it opens it), and trace folders of steps
after the checkpoint (rolled out, then lost with the crash) move aside, so every step shows once."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from verl.utils import tracking

logger = logging.getLogger(__name__)
BACKUP_SUFFIX = ".before-resume"
ABANDONED_DIR = ".abandoned"


def file_logger_path(project_name: str, experiment_name: str) -> Path:
    """The file verl's file logger writes: $VERL_FILE_LOGGER_PATH, else $VERL_FILE_LOGGER_ROOT/project/experiment."""
    explicit = os.getenv("VERL_FILE_LOGGER_PATH")
    if explicit:
        return Path(explicit)
    root = Path(os.path.expanduser(os.getenv("VERL_FILE_LOGGER_ROOT", ".")))
    return root / project_name / f"{experiment_name}.jsonl"


def lines_through(path: Path, step: int) -> list[bytes]:
    """The complete records of `path` whose step is <= `step` (a line a kill cut off is dropped)."""
    kept = []
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= step:
            kept.append(line.strip())
    return kept


def _resumed_logger(step: int) -> type:
    class ResumedFileLogger(tracking.FileLogger):
        """verl's file logger, which first writes back the records of steps 1..`step` the file held."""

        def __init__(self, project_name: str, experiment_name: str):
            path = file_logger_path(project_name, experiment_name)
            backup = path.with_name(path.name + BACKUP_SUFFIX)
            if path.is_file() and not backup.exists():  # a backup left by a kill during the last resume wins
                os.replace(path, backup)
            kept = lines_through(backup, step) if backup.is_file() else []
            super().__init__(project_name, experiment_name)
            for line in kept:
                self.fp.write(line + b"\n")
            os.fsync(self.fp.fileno())
            backup.unlink(missing_ok=True)
            print(f"verl-cua: resumed at step {step}: kept {len(kept)} metric records of {path}")

    return ResumedFileLogger


@contextmanager
def keep_metrics_through(step: int) -> Iterator[None]:
    """Inside the block, verl's file logger keeps the records of steps <= `step` (0: verl's own, a fresh file)."""
    if step <= 0:
        yield
        return
    upstream = tracking.FileLogger
    tracking.FileLogger = _resumed_logger(step)
    try:
        yield
    finally:
        tracking.FileLogger = upstream


def set_aside_trace_steps(trace_dir: str | None, step: int, validates_at_start: bool = False) -> list[Path]:
    """Move trace folders the resumed run writes again into `<trace_dir>/.abandoned/<time>/`: `step_N` with N >
    `step`, and `val_step_N` with N > `step` (N >= `step` when verl validates again before resuming); the moved
    folders (readers skip hidden folders)."""
    if not trace_dir or not Path(trace_dir).is_dir():
        return []
    later = []
    for prefix, first in (("step_", step + 1), ("val_step_", step if validates_at_start else step + 1)):
        for folder in Path(trace_dir).glob(f"{prefix}*"):
            number = folder.name[len(prefix) :]
            if number.isdigit() and int(number) >= first:
                later.append(folder)
    if not later:
        return []
    target = Path(trace_dir) / ABANDONED_DIR / f"resumed-at-{step}-{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir(parents=True, exist_ok=True)
    for folder in later:
        shutil.move(str(folder), target / folder.name)
    logger.warning(f"verl-cua: moved {len(later)} trace folders of steps after {step} (run again now) to {target}")
    return later
