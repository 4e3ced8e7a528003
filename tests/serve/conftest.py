"""The served tiny model both of this folder's server modules talk to."""

import subprocess
import sys
import time

import pytest

from verl_cua.testing.tiny_models import build_tiny_model


@pytest.fixture(scope="module")
def server():
    """`verl-cua serve` of the tiny random Qwen2.5-VL on a free loopback port, with a 600-token context; its base
    URL (one server a module: xdist runs each module on its own worker)."""
    model = build_tiny_model("qwen25vl")
    cmd = [sys.executable, "-m", "verl_cua.cli", "serve", str(model), "--port", "0", "--served-model-name", "tiny",
           "--max-model-len", "600"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url, lines = None, []
    deadline = time.monotonic() + 240
    while url is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("verl-cua serve: tiny at "):
            url = line.rsplit(" ", 1)[1].strip()
    assert url, "".join(lines[-20:])
    yield url
    proc.terminate()
    proc.wait(timeout=30)
