"""Kill tests' helpers: a Python script in a subprocess, SIGKILLed once the test sees it far enough along; whether a
stopped process group is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


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


def group_gone(group: int, seconds: float = 10.0) -> bool:
    """Whether every process of the process group `group` has exited (within `seconds`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@contextmanager
def own_group(cmd: list[str], **popen) -> Iterator[subprocess.Popen]:
    """`cmd` started in a process group of its own (a test signals the whole group, as a terminal does); SIGKILLed
    with its group if it still runs when the block ends."""
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
