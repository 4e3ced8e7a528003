"""What the local desktop's tests share: waiting on a condition, and which of a desktop's pids still run."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> bool:
    """Poll `predicate` every 0.1 s until it is true or `timeout` passes; its value once more at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())


def running(pids: list[int]) -> list[int]:
    """The pids that still run (zombies and vanished processes are not running)."""
    import psutil

    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive
