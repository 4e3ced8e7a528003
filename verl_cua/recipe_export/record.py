"""Run a recipe script with stub `python3`/`python`/`docker`/`torchrun` executables that only record their argv
(nothing installed, downloaded or trained), and read back the Hydra overrides it hands to the trainer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MAIN = ["-m", "verl_cua.main"]
STUB_NAMES = ("python3", "python", "docker", "torchrun")
STUB = """import json, os, sys
with open(os.environ["RECIPE_STUB_LOG"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[1]), *sys.argv[2:]]) + "\\n")
if os.path.basename(sys.argv[1]) == "torchrun":  # as verl's SFT trainer does at its last step
    ckpt = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("trainer.default_local_dir="))
    os.makedirs(ckpt, exist_ok=True)
    open(os.path.join(ckpt, "latest_checkpointed_iteration.txt"), "w").write("7")
"""


class RecipeRunError(RuntimeError):
    """A recipe failed before its trainer call, or made other trainer calls than expected."""


def write_stubs(folder: Path) -> Path:
    """Write `folder/bin/{python3,python,docker,torchrun}`, each logging its argv as one JSON line and exiting 0;
    returns the bin folder (put it first on PATH; its parent serves as a `VENV`)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = folder / "record.py"
    script.write_text(STUB)
    for name in STUB_NAMES:
        exe = bin_dir / name
        exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$0" "$@"\n')
        exe.chmod(0o755)
    return bin_dir


def record_calls(recipe: Path, stubs: Path, cwd: Path, *args: str, env: dict[str, str]) -> list[list[str]]:
    """Run `bash recipe *args` in `cwd` with `stubs` first on PATH and `env` (plus PATH and the log's variable) as
    its whole environment; every recorded argv, in order ([stub name, *arguments])."""
    log = stubs.parent / "argv.jsonl"
    log.unlink(missing_ok=True)
    run_env = {**env, "PATH": f"{stubs}:{env.get('PATH', os.environ.get('PATH', ''))}", "RECIPE_STUB_LOG": str(log)}
    proc = subprocess.run(
        ["bash", str(recipe), *args], env=run_env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    if proc.returncode:
        raise RecipeRunError(f"{recipe.name} exited {proc.returncode} before training: {proc.stderr[-4000:]}")
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def main_overrides(calls: list[list[str]], entry: list[str] = MAIN) -> list[str]:
    """The Hydra overrides of the one `python -m <entry>` call among `calls`."""
    mains = [c[3:] for c in calls if c[0].startswith("python") and c[1:3] == entry]
    if len(mains) != 1:
        raise RecipeRunError(f"expected one `python {' '.join(entry)}` call, got {len(mains)}: {calls}")
    return mains[0]
