"""Bounded calls into an env: `call_with_timeout` (a call that may hang on a browser or a desktop) and `kill_env` (its
processes killed, children first, when a call failed). Shared by the pool and its Ray backend."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from verl_cua.envs.base import GUIEnv

logger = logging.getLogger(__name__)
T = TypeVar("T")


class CallTimeout(TimeoutError):
    """A call to an env that did not return in time (`call_with_timeout`); not any other TimeoutError raised inside
    the call (a socket's, a future's), which callers must tell apart. `worker`: the thread still running the call."""

    def __init__(self, message: str, worker: threading.Thread | None = None):
        super().__init__(message)
        self.worker = worker


def call_with_timeout(fn: Callable[[], T], timeout: float | None, on_late: Callable[[T], None] | None = None) -> T:
    """Run `fn` in a daemon thread: `CallTimeout` after `timeout` s; a value returned later goes to `on_late`."""
    if timeout is None:
        return fn()
    box: dict[str, Any] = {}
    guard = threading.Lock()

    def run() -> None:
        try:
            value = fn()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
            return
        with guard:
            late = box.get("abandoned", False)
            box["value"] = value
        if late and on_late is not None:
            on_late(value)

    worker = threading.Thread(target=run, daemon=True, name="verl-cua-env-call")
    worker.start()
    worker.join(timeout)
    with guard:
        if "value" not in box and "error" not in box:
            box["abandoned"] = True
            raise CallTimeout(f"no answer after {timeout:g}s", worker)
    if "error" in box:
        raise box["error"]
    return box["value"]


def kill_env(env: GUIEnv) -> None:
    """Kill the env's processes by PID (children first) when it exposes them; remote envs kill their own."""
    kill = getattr(env, "kill", None)
    if kill is not None:
        try:
            kill()
        except Exception:
            logger.debug("could not kill a remote env", exc_info=True)
        return
    pids = getattr(env, "pids", None)
    if pids is None:
        return
    try:
        import psutil

        for pid in reversed(call_with_timeout(pids, 5.0)):
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
    except Exception:
        logger.debug("could not kill env processes", exc_info=True)
