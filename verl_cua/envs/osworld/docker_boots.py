"""The docker desktops' boots, planned: a host-wide bound on boots at once, each start's timings, and one port
choice per desktop.

- `BootSlots`: at most `docker_boot_batch` containers of this host boot at once (0: no bound). Each boot holds one
  of that many lock files beside desktop-env's port lock (`docker_boot_slot.<i>.lck`) from before its turn at that
  lock to its VM's first screenshot, so the first wave of a pool, and of every process on the host, starts in
  batches of that size.
- `StartTimes`: what one start spent waiting for a boot slot, waiting for and holding desktop-env's lock, and
  booting (what `verl-cua probe-boots` reports, and `LabelledDockerProvider.starts` keeps).
- `port_free`: whether a host port can be bound now (a bind, not a scan of the host's connections).
"""

from __future__ import annotations

import logging
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import filelock

logger = logging.getLogger(__name__)

BOOT_BATCH = 8  # containers of a host booting at once (0: no bound); `verl-cua probe-boots` measures a host's own
SLOT_POLL = 0.2  # seconds between two looks for a free boot slot


@dataclass
class StartTimes:
    """One container start's seconds: boot slot wait, desktop-env's lock wait and hold, boot (run to screenshot)."""

    slot_wait: float = 0.0
    lock_wait: float = 0.0
    lock_hold: float = 0.0
    boot: float = 0.0
    port_scans: int = 0  # scans of the host's ports (psutil + docker) this start made under desktop-env's lock


class BootSlots:
    """`batch` host-wide lock files; a boot holds one of them (any free one) while its container starts."""

    def __init__(self, folder: Path, batch: int):
        self.paths = [Path(folder) / f"docker_boot_slot.{i}.lck" for i in range(int(batch))]

    def hold(self, closed: Callable[[], bool]) -> filelock.FileLock | None:
        """Wait for a free slot and take it (None when there is no bound); raises `Closed` once `closed()`."""
        if not self.paths:
            return None
        order = random.sample(self.paths, len(self.paths))  # no slot is everyone's first try
        told = False
        while True:
            for path in order:
                lock = filelock.FileLock(str(path), timeout=0)
                try:
                    lock.acquire()
                    return lock
                except filelock.Timeout:
                    continue
            if closed():
                raise Closed("the docker desktop was closed while it waited for a boot slot")
            if not told:
                logger.info("all %d docker boot slots busy (docker_boot_batch); waiting for one", len(self.paths))
                told = True
            time.sleep(SLOT_POLL)


class Closed(Exception):
    """The desktop was closed while its start waited."""


def port_free(port: int) -> bool:
    """Whether `port` can be bound on every address now (a published docker port or a listener holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # connections in TIME_WAIT hold nothing
        try:
            probe.bind(("0.0.0.0", int(port)))
        except OSError:
            return False
    return True
