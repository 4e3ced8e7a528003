"""`python -m verl_cua.testing.learning model` (the quickstart's first step, captured with $(...)): stdout is the
model's path alone; what it does and its progress go to stderr; a second call finds the cached model."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _model(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "VERL_CUA_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "verl_cua.testing.learning", "model", "--warm-steps", "3"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def test_stdout_is_the_path_alone_and_progress_goes_to_stderr(tmp_path):
    built = _model(tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    path = Path(built.stdout.removesuffix("\n"))
    assert built.stdout == f"{path}\n" and path.is_relative_to(tmp_path) and (path / "config.json").is_file()
    progress = [line for line in built.stderr.splitlines() if line.startswith("warm start of ")]
    assert progress[0].endswith(": 3 steps on the CPU (built once, then cached)")
    assert progress[-1].split(": ", 1)[1].startswith("3/3 steps, ") and ", loss " in progress[-1]
    again = _model(tmp_path)
    assert again.returncode == 0 and again.stdout == built.stdout  # the cached model, found
    assert "warm start of " not in again.stderr
