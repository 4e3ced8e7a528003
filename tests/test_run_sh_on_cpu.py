"""tests/run.sh (README's test command) refuses, in one line and before installing anything, a disk too full."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(tmp_path)], capture_output=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")
    yield tmp_path
    subprocess.run(["umount", str(tmp_path)], check=True)


def test_a_venv_on_a_disk_too_small_fails_in_one_line_before_any_install(small_disk):
    venv = small_disk / "venv"
    env = {**os.environ, "VERL_CUA_VENV": str(venv), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    result = subprocess.run(["bash", "tests/run.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tests/run.sh: needs about 9 GiB free for " + str(venv))
    assert "0 GiB free there" in lines[0]
    assert not venv.exists() and list(small_disk.iterdir()) == []
