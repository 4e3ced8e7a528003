"""Kill tests' writer: a Python script in a subprocess, SIGKILLed once the test sees it far enough along."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable


def kill_when(script: str, args: list[str], ready: Callable[[], bool], timeout: float) -> subprocess.Popen:
    """Run `python -c script *args`, SIGKILL it once `ready()` holds (or after `timeout` seconds); the dead process."""
    writer = subprocess.Popen([sys.executable, "-c", script, *args])
    try:
        deadline = time.monotonic() + timeout
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    return writer
