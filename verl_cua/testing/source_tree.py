"""A copy of a checkout's tracked and not-ignored files (links kept as links): what a clone would build from, so a
test can build or `pip install -e` it without rewriting the checkout's own metadata (its egg-info folder)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def source_copy(root: Path, dest: Path) -> Path:
    """`dest` filled with the files `git ls-files -co --exclude-standard` names under `root` (deleted ones skipped)."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        src, dst = root / name, dest / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    return dest
