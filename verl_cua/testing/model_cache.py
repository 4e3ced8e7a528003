"""Models derived from a tiny model (warm starts, SFT rungs), built once per recipe and cached beside it."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def derived_model(src: Path, kind: str, recipe: str, build: Callable[[Path], Path | None]) -> Path:
    """`<src>-<kind>-<hash of recipe>` beside `src`: built by `build(work_dir)` under a lock the first time (it writes
    the model into `work_dir`, or returns the folder inside it to publish), then found; a crash publishes nothing."""
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    out = src.parent / f"{src.name}-{kind}-{key}"
    if (out / "config.json").exists():
        return out
    with open(src.parent / f".{src.name}-{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "config.json").exists():
            return out
        work = Path(tempfile.mkdtemp(dir=src.parent, prefix=f".{src.name}-{kind}-"))
        try:
            built = build(work)
            os.replace(built or work, out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out
