"""Read verl's metrics file (`VERL_FILE_LOGGER_PATH`: one `{"step": S, "data": {...}}` line per `logger.log` call)
as one record per step, whatever crashes and resumes the run went through.

A run killed mid-write leaves a cut last line: it is skipped (and counted in a warning). A run resumed from
`global_step_N` logs its validation at step N again and re-runs the steps after N: records of the same step are
merged in file order, later keys winning, so step N keeps its training metrics and a re-run step takes the re-run's
values. Stdlib only: no torch, no verl.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

STEP_KEY = "timing_s/step"  # verl logs it on every training step, never on a validation-only record


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """One `{"step": S, "data": {...}}` per step, in step order: the file's records merged per step (later keys win);
    lines that do not parse as a record (a cut last line) are skipped with one warning."""
    merged: dict[int, dict[str, Any]] = {}
    skipped = 0
    for line in Path(path).read_bytes().splitlines():
        if not line.strip():
            continue
        record = _parse(line)
        if record is None:
            skipped += 1
            continue
        merged.setdefault(record["step"], {}).update(record["data"])
    if skipped:
        logger.warning("%s: skipped %d line(s) that are not a metrics record (a killed run cuts its last line)",
                       path, skipped)  # fmt: skip
    return [{"step": step, "data": merged[step]} for step in sorted(merged)]


def _parse(line: bytes) -> dict[str, Any] | None:
    """The record of one line, or None when it is not JSON or not verl's `{"step": int, "data": dict}`."""
    try:
        record = json.loads(line)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None
    if not isinstance(record, dict) or not isinstance(record.get("data"), dict):
        return None
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int):
        return None
    return record


def training_steps(path: str | Path, key: str = STEP_KEY) -> list[dict[str, Any]]:
    """The metrics of each training step (each step whose merged record has `key`), as `{"step": S, **data}`."""
    return [{"step": r["step"], **r["data"]} for r in read_records(path) if key in r["data"]]
