"""tests/conftest.py skips `*_on_gpu.py` tests with a visible reason where torch sees no CUDA device."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_TEST = "tests/integrations/verl/test_cuda_forward_on_gpu.py"
README_TEST = "tests/docs/test_docs_site_on_cpu.py::test_readme_is_a_landing_page_with_the_two_setup_commands"
REASON = "needs a CUDA GPU (torch.cuda.is_available() is False)"


def _pytest(*args: str) -> subprocess.CompletedProcess:
    """Run pytest on this repository's suite settings in a child interpreter and return its output."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no device, whatever the machine has
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_gpu_test_file_is_collected_and_skipped_with_the_reason_in_the_summary():
    """The GPU test is collected by the suite's python_files, then skipped, and -ra names why."""
    pytest.importorskip("torch")
    run = _pytest("-ra", GPU_TEST)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout
    assert f"SKIPPED [1] {GPU_TEST}" in run.stdout and REASON in run.stdout


def test_cpu_tests_beside_a_gpu_file_still_run():
    """Only items of *_on_gpu.py files are skipped: a CPU test collected in the same session runs and passes."""
    pytest.importorskip("torch")
    run = _pytest("-ra", GPU_TEST, README_TEST)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 1 skipped" in run.stdout


def test_the_hook_imports_no_torch_when_no_gpu_test_is_collected():
    """A CPU-only session never imports torch on the hook's account (the core install has no torch)."""
    code = (
        "import sys, pytest; "
        f"rc = pytest.main(['-q', '-p', 'no:cacheprovider', '{README_TEST}']); "
        "print('TORCH_IMPORTED', 'torch' in sys.modules); sys.exit(rc)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "TORCH_IMPORTED False" in run.stdout
