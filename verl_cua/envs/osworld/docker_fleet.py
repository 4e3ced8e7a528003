"""OSWorld's docker provider at many desktops: a long lock wait, lock timeouts retried, starts spaced apart, and
every container labelled, removed on close and, after a crash, by the next run on the host.

desktop-env's `DockerProvider` picks ports and runs the container under one host-wide file lock, waiting at most its
module constant `LOCK_TIMEOUT` (10 s) for it; every reset of a used desktop runs a new container. Dozens of desktops
starting or resetting at once queue on that lock, and most waits time out. `LabelledDockerProvider` is desktop-env's
provider with: the lock wait raised (`docker_lock_timeout`, set on desktop-env's module, so process-wide), a lock
timeout retried after a pause (`docker_lock_retries`), starts of this process spaced `docker_start_interval` apart,
and labels on each container (`verl-cua.run`, `.host`, `.owner-pid`, `.owner-started`, `.env`) by which `close()`
removes what this desktop ran and `reap_dead_owners` removes what a dead process left on this host.
"""

from __future__ import annotations

import inspect
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import filelock
import psutil
from desktop_env.providers.docker import provider as upstream

from verl_cua.envs.base import InfraFailure

logger = logging.getLogger(__name__)

LOCK_TIMEOUT = 600.0  # seconds one start waits for desktop-env's lock (desktop-env: 10)
LOCK_RETRIES = 1  # lock timeouts retried per start
START_INTERVAL = 1.0  # seconds between two container starts of this process
BACKOFF_CAP = 30.0  # longest pause before a lock wait is retried
STOP_MARGIN = 60.0  # a reset's stop of the old container (docker stop, desktop-env's pause) and slack
BOOT_TIMEOUT = float(inspect.signature(upstream.DockerProvider._wait_for_vm_ready).parameters["timeout"].default)
OPTIONS = {"docker_lock_timeout": LOCK_TIMEOUT, "docker_lock_retries": LOCK_RETRIES,
           "docker_start_interval": START_INTERVAL}  # fmt: skip

RUN, HOST, OWNER_PID, OWNER_STARTED, ENV, PID_NS, BOOT = (
    f"verl-cua.{key}" for key in ("run", "host", "owner-pid", "owner-started", "env", "pid-ns", "boot")
)


def pop_options(kwargs: dict[str, Any]) -> dict[str, float]:
    """Take our docker options out of the env's kwargs, checked, with defaults filled."""
    options = {name: kwargs.pop(name, default) for name, default in OPTIONS.items()}
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if options["docker_lock_timeout"] <= 0:
        raise ValueError(f"docker_lock_timeout must be > 0 seconds, got {options['docker_lock_timeout']!r}")
    if int(options["docker_lock_retries"]) != options["docker_lock_retries"]:
        raise ValueError(f"docker_lock_retries must be a whole number, got {options['docker_lock_retries']!r}")
    return options


def start_timeout(pool_size: int, options: Mapping[str, float]) -> float:
    """Seconds a pool should wait for one docker desktop: lock waits, pauses, spaced starts, boot, a margin."""
    lock, retries = float(options["docker_lock_timeout"]), int(options["docker_lock_retries"])
    waits = (retries + 1) * lock + retries * min(BACKOFF_CAP, lock / 10)
    return waits + pool_size * float(options["docker_start_interval"]) + BOOT_TIMEOUT + STOP_MARGIN


def run_id() -> str:
    """This run's id for the labels: $VERL_CUA_RUN_ID, else one of this process."""
    return os.environ.get("VERL_CUA_RUN_ID") or _PROCESS_RUN


def owner_labels(env_id: str) -> dict[str, str]:
    """The labels of a container this process runs for the desktop `env_id`."""
    return {RUN: run_id(), HOST: socket.gethostname(), OWNER_PID: str(os.getpid()),
            OWNER_STARTED: _started(psutil.Process()), ENV: env_id,
            PID_NS: pid_namespace(), BOOT: boot_id()}  # fmt: skip


def pid_namespace() -> str:
    """This process's PID namespace (`pid:[inode]`): an owner pid means something only inside the same one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown"


def boot_id() -> str:
    """This machine's boot id: pids of an earlier boot are meaningless."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def remove_labelled(client: Any, labels: Mapping[str, str]) -> int:
    """Remove (forcibly) every container, running or not, that carries all of `labels`; how many were removed."""
    found = client.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]})
    return sum(_remove(container) for container in found)


def reap_dead_owners(client: Any) -> int:
    """Remove this host's verl-cua containers whose owner process has exited; how many were removed."""
    # judged only for this PID namespace (elsewhere an owner's pid says nothing here); an earlier boot's always go.
    # A trainer in a container restarted under a new hostname does not see its predecessor's: remove_labelled(client,
    # {RUN: <run id>}), or `docker rm -f $(docker ps -aq -f label=verl-cua.run=ID)`
    host, namespace, boot = socket.gethostname(), pid_namespace(), boot_id()
    removed = 0
    for container in client.containers.list(all=True, filters={"label": [f"{HOST}={host}"]}):
        labels = container.labels or {}
        if OWNER_PID not in labels or labels.get(PID_NS, namespace) != namespace:
            continue  # another PID namespace's owner (a pod sharing the host name): not ours to judge
        earlier_boot = labels.get(BOOT, boot) != boot
        if earlier_boot or not _owner_alive(labels[OWNER_PID], labels.get(OWNER_STARTED)):
            removed += _remove(container)
    if removed:
        logger.warning("removed %d docker desktop(s) left behind by exited verl-cua processes on %s", removed, host)
    return removed


def reap_once(client: Any) -> None:
    """`reap_dead_owners` at the first docker desktop of this process; a failure is logged, never raised."""
    global _reaped
    with _reap_lock:
        if _reaped:
            return
        _reaped = True
        try:
            reap_dead_owners(client)
        except Exception as exc:
            logger.warning("could not look for docker desktops left by exited processes: %s", exc)


class LabelledDockerProvider(upstream.DockerProvider):
    """desktop-env's DockerProvider whose starts retry lock timeouts, are spaced apart, and label their containers."""

    def __init__(self, region: str | None, options: Mapping[str, float]):
        super().__init__(region)
        with _reap_lock:  # read by desktop-env at each start, process-wide: the longest asked for holds
            upstream.LOCK_TIMEOUT = max(float(upstream.LOCK_TIMEOUT), float(options["docker_lock_timeout"]))
        self.lock_retries = int(options["docker_lock_retries"])
        self.start_interval = float(options["docker_start_interval"])
        self.env_id = uuid.uuid4().hex[:16]
        self.labels = owner_labels(self.env_id)
        self.closed = False
        self.docker = self.client
        self.client = _LabellingClient(self.docker, self)
        reap_once(self.docker)

    def start_emulator(self, path_to_vm: str, headless: bool, os_type: str) -> None:
        """Run and boot a container (desktop-env's start); a lock timeout is retried `lock_retries` times."""
        for attempt in range(self.lock_retries + 1):
            _SPACER.wait(self.start_interval)
            if self.closed:  # checked after the wait too: the turn may come long after a close
                raise InfraFailure("the docker desktop was closed before its container started")
            try:
                return super().start_emulator(path_to_vm, headless, os_type)
            except filelock.Timeout:
                if attempt == self.lock_retries:
                    break
                pause = min(BACKOFF_CAP, upstream.LOCK_TIMEOUT / 10) * random.uniform(0.5, 1.0)
                logger.info("docker lock busy for %g s; retrying in %.1f s", upstream.LOCK_TIMEOUT, pause)
                time.sleep(pause)
        waits = f"{self.lock_retries + 1} x {upstream.LOCK_TIMEOUT:g} s"
        raise InfraFailure(
            f"desktop-env's docker lock {self.lock_file} stayed busy ({waits} waited); raise "
            "+cua.env.kwargs.docker_lock_timeout=SECONDS or +cua.env.kwargs.docker_lock_retries=N"
        )

    def close(self) -> None:
        """Start no more containers and remove every container of this desktop (by its label)."""
        self.closed = True
        try:
            remove_labelled(self.docker, {ENV: self.env_id})
        except Exception as exc:
            logger.warning("could not remove the containers of docker desktop %s: %s", self.env_id, exc)


class _LabellingContainers:
    """`client.containers` whose `run` adds the provider's labels and removes a container its closed desktop got."""

    def __init__(self, containers: Any, provider: LabelledDockerProvider):
        self._containers, self._provider = containers, provider

    def run(self, image: str, *args: Any, **kwargs: Any) -> Any:
        """`containers.run` with our labels."""
        kwargs["labels"] = {**(kwargs.get("labels") or {}), **self._provider.labels}
        container = self._containers.run(image, *args, **kwargs)
        if self._provider.closed:  # closed while docker ran it: close() may have listed before it existed
            _remove(container)
            raise InfraFailure("the docker desktop was closed while its container started")
        return container

    def __getattr__(self, name: str) -> Any:
        return getattr(self._containers, name)


class _LabellingClient:
    """A docker client whose `containers.run` labels what it runs."""

    def __init__(self, client: Any, provider: LabelledDockerProvider):
        self._client = client
        self.containers = _LabellingContainers(client.containers, provider)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _Spacer:
    """Container starts of this process begin at least `interval` seconds apart (first come, first served)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 0.0

    def wait(self, interval: float) -> None:
        """Sleep until this start's turn."""
        if interval <= 0:
            return
        with self._lock:
            now = time.monotonic()
            turn = max(now, self._next)
            self._next = turn + interval
        time.sleep(turn - now)


def _remove(container: Any) -> bool:
    try:
        container.remove(force=True)
        return True
    except upstream.docker.errors.NotFound:
        return False
    except Exception as exc:
        logger.warning("could not remove docker container %s: %s", getattr(container, "id", "?"), exc)
        return False


def _started(process: psutil.Process) -> str:
    return f"{process.create_time():.2f}"


def _owner_alive(pid: str, started: str | None) -> bool:
    """Whether the process that ran a container still runs (not a later process given the same pid)."""
    try:
        process = psutil.Process(int(pid))
        return started is None or _started(process) == started
    except psutil.AccessDenied:
        return True  # someone else's process: not ours to judge
    except (ValueError, psutil.Error):
        return False


_SPACER = _Spacer()
_PROCESS_RUN = f"{socket.gethostname()}-{os.getpid()}-{int(time.time())}"
_reap_lock = threading.Lock()
_reaped = False
