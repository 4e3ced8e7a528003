"""Models derived from a tiny model (warm starts, SFT rungs), built once per recipe and cached beside it.

A build holds a lock (an `flock`, which the kernel releases when its holder dies, however it dies: a dead holder's
lock is free at once, and the next process takes the build over, from its checkpoint). The lock file names its
holder (pid, host, since when) and the holder's latest progress line, which a waiting process prints at once and
every `WAIT_REPORT_S`. A build's training loops keep checkpoints in `.<model>.state/` beside the cache
(`train_checkpoint`), so a build stopped by Ctrl-C or killed continues from its last checkpoint; the folder goes
once the model is published.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from verl_cua.testing.train_checkpoint import Checkpointer, pending_stop, stop_signals

WAIT_REPORT_S = 30.0  # a waiting process says again what it waits for (the first line comes at once)
POLL_S = 0.5
_active: list[CacheLock] = []  # the build this process runs now: where its loops checkpoint and report


class CacheLock:
    """An exclusive lock on a cache entry, its file naming the holder and the holder's progress."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = path, what
        self.state: Path | None = None  # the build's checkpoint folder, once it holds the lock
        self._file: IO[str] | None = None
        self._since = 0.0

    def acquire(self) -> None:
        """Take the lock, printing on stderr at once and every `WAIT_REPORT_S` what holds it while it waits."""
        self._file = open(self.path, "a+")  # noqa: SIM115 (held until release; "w" would erase the holder's note)
        reported = 0.0
        while True:
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if not reported or now - reported >= WAIT_REPORT_S:
                    print(f"verl-cua cache: waiting for {self.what}: {describe(self.holder())}", file=sys.stderr,
                          flush=True)  # fmt: skip
                    reported = now
                time.sleep(POLL_S)
        previous = self.holder()  # a holder that ended cleared its note: one left is a holder that died
        if previous and previous.get("what") == self.what:
            print(f"verl-cua cache: {self.what}: its builder pid {previous.get('pid')} died at "
                  f"{previous.get('status')!r}; taking the build over", file=sys.stderr, flush=True)  # fmt: skip
        self._since = time.time()
        self.report("starting")

    def holder(self) -> dict | None:
        """The holder's note in the lock file (pid, host, since, what, status), None when there is none readable."""
        try:
            text = self.path.read_text()
            return json.loads(text) if text.strip() else None
        except (OSError, ValueError):
            return None

    def report(self, status: str) -> None:
        """Write this process's note (pid, host, since, what it builds, `status`) into the lock file, for waiters."""
        if self._file is None:
            return
        note = {"pid": os.getpid(), "host": socket.gethostname(), "since": self._since, "what": self.what,
                "status": status}  # fmt: skip
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps(note))
        self._file.flush()

    def release(self) -> None:
        """Clear the note and unlock."""
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()
            self._file.close()  # closing the file drops the flock
            self._file = None


def describe(note: dict | None) -> str:
    """A waiter's line about the lock's holder: who, since when, its latest progress."""
    if not note:
        return "another process holds its lock (no note yet)"
    since = time.strftime("%H:%M:%S", time.localtime(note.get("since") or 0))
    what = note.get("what") or "it"
    return (
        f"pid {note.get('pid')} on {note.get('host')} builds {what} (since {since}); its progress: {note.get('status')}"
    )


@contextmanager
def cache_lock(path: Path, what: str) -> Iterator[CacheLock]:
    """Hold the lock `path` for the build of `what` (waiting as `CacheLock.acquire` says)."""
    lock = CacheLock(path, what)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


def report_progress(line: str) -> None:
    """The running build's latest progress line, noted in its lock file (no build running: nothing)."""
    if _active:
        _active[-1].report(line)


def checkpointer(phase: str, what: str, total: int) -> Checkpointer:
    """The checkpoint of the running build's loop `phase` (of `total` steps); outside a build: one that keeps none."""
    return Checkpointer(_active[-1].state if _active else None, phase, what, total)


def derived_model(src: Path, kind: str, recipe: str, build: Callable[[Path], Path | None]) -> Path:
    """`<src>-<kind>-<hash of recipe>` beside `src`: built by `build(work_dir)` under a lock the first time (it writes
    the model into `work_dir`, or returns the folder inside it to publish), then found; a crash publishes nothing,
    and its loops' checkpoints (`checkpointer`) are kept in `.<model>.state/` for the next build to continue from."""
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    out = src.parent / f"{src.name}-{kind}-{key}"
    if (out / "config.json").exists():
        return out
    with cache_lock(src.parent / f".{src.name}-{kind}.lock", out.name) as lock:
        if (out / "config.json").exists():
            return out
        lock.state = src.parent / f".{out.name}.state"
        prefix = f".{src.name}-{kind}-"
        for stale in src.parent.glob(f"{prefix}*"):  # the lock is this kind's: a work folder left is a dead build's
            if stale.is_dir() and not stale.name.endswith(".state"):
                shutil.rmtree(stale, ignore_errors=True)
        work = Path(tempfile.mkdtemp(dir=src.parent, prefix=prefix))
        _active.append(lock)
        try:
            with stop_signals():
                built = build(work)
                os.replace(built or work, out)
                shutil.rmtree(lock.state, ignore_errors=True)
                pending_stop()  # a signal during the last step: acted on now that the model is published
        finally:
            _active.remove(lock)
            shutil.rmtree(work, ignore_errors=True)
    return out
