"""OSWorld's docker provider at many desktops: a long lock wait, lock timeouts retried, starts spaced apart, boots
bounded host-wide, ports chosen once per desktop, and every container labelled, removed on close and, after a
crash, by the next run on the host.

desktop-env's `DockerProvider` picks four ports (four scans of the host's connections and containers) and runs the
container under one host-wide file lock, waiting at most its module constant `LOCK_TIMEOUT` (10 s) for it, then waits
a fixed 300 s for the VM; every reset of a used desktop runs a new container. Dozens of desktops starting or
resetting at once queue on that lock, and most waits time out. `LabelledDockerProvider` is desktop-env's provider
with: the lock wait raised (`docker_lock_timeout`, set on desktop-env's module, so process-wide), a lock timeout
retried after a pause (`docker_lock_retries`), starts of this process spaced `docker_start_interval` apart, the
boot wait a setting (`docker_boot_timeout`), at most `docker_boot_batch` boots at once on the host
(`docker_boots.BootSlots`), the ports chosen by one scan at the desktop's first start and kept for its resets (a
reset takes no host lock: a port someone took meanwhile is chosen anew, under the lock), and labels on each
container (`verl-cua.run`, `.host`, `.owner-pid`, `.owner-started`, `.env`) by which `close()` removes what this
desktop ran and `reap_dead_owners` removes what a dead process left on this host. `starts` keeps each start's times.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import filelock
import psutil
from desktop_env.providers.docker import provider as upstream

from verl_cua.envs.base import InfraFailure
from verl_cua.envs.osworld.docker_boots import BOOT_BATCH, BootSlots, Closed, StartTimes, port_free

logger = logging.getLogger(__name__)

LOCK_TIMEOUT = 600.0  # seconds one start waits for desktop-env's lock (desktop-env: 10)
LOCK_RETRIES = 1  # lock timeouts retried per start
START_INTERVAL = 1.0  # seconds between two container starts of this process
BACKOFF_CAP = 30.0  # longest pause before a lock wait is retried
READY_SLICE = 5.0  # seconds of desktop-env's readiness wait between two looks at whether the desktop was closed
STOP_MARGIN = 60.0  # a reset's stop of the old container (docker stop, desktop-env's pause) and slack
# desktop-env's own readiness wait (300 s), the default of `docker_boot_timeout`
BOOT_TIMEOUT = float(inspect.signature(upstream.DockerProvider._wait_for_vm_ready).parameters["timeout"].default)
OPTIONS = {"docker_lock_timeout": LOCK_TIMEOUT, "docker_lock_retries": LOCK_RETRIES,
           "docker_start_interval": START_INTERVAL, "docker_boot_timeout": BOOT_TIMEOUT,
           "docker_boot_batch": BOOT_BATCH}  # fmt: skip
WHOLE = ("docker_lock_retries", "docker_boot_batch")  # counts
PORT_TAKEN = ("port is already allocated", "address already in use")  # docker's refusals of a taken host port

RUN, HOST, OWNER_PID, OWNER_STARTED, ENV, PID_NS, BOOT = (
    f"verl-cua.{key}" for key in ("run", "host", "owner-pid", "owner-started", "env", "pid-ns", "boot")
)


def pop_options(kwargs: dict[str, Any]) -> dict[str, float]:
    """Take our docker options out of the env's kwargs, checked, with defaults filled."""
    options = {name: kwargs.pop(name, default) for name, default in OPTIONS.items()}
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    for name in ("docker_lock_timeout", "docker_boot_timeout"):
        if options[name] <= 0:
            raise ValueError(f"{name} must be > 0 seconds, got {options[name]!r}")
    for name in WHOLE:
        if int(options[name]) != options[name]:
            raise ValueError(f"{name} must be a whole number, got {options[name]!r}")
    return options


def start_timeout(pool_size: int, options: Mapping[str, float]) -> float:
    """Seconds a pool should wait for one docker desktop: lock waits, pauses, spaced starts, the boots of the
    batches before its own (`docker_boot_batch` at once), its boot, a margin."""
    lock, retries = float(options["docker_lock_timeout"]), int(options["docker_lock_retries"])
    waits = (retries + 1) * lock + retries * min(BACKOFF_CAP, lock / 10)
    boot, batch = float(options["docker_boot_timeout"]), int(options["docker_boot_batch"])
    batches_before = math.ceil(pool_size / batch) - 1 if batch else 0
    return waits + pool_size * float(options["docker_start_interval"]) + (batches_before + 1) * boot + STOP_MARGIN


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
        self.boot_timeout = float(options["docker_boot_timeout"])
        self.host_lock = Path(self.lock_file)  # desktop-env's, host-wide
        self.boot_slots = BootSlots(self.host_lock.parent, int(options["docker_boot_batch"]))
        self.ports: dict[int, int] = {}  # desktop-env's start port -> the host port kept for this desktop
        self.starts: list[StartTimes] = []  # each start's times (docker_boots.StartTimes)
        self._scan: set[int] | None = None
        self._entered = 0.0
        self._locked: float | None = None
        self._ran: float | None = None
        self.env_id = uuid.uuid4().hex[:16]
        self.own_lock = self.host_lock.with_name(f"docker_desktop.{self.env_id}.lck")  # a reset's, uncontended
        self.labels = owner_labels(self.env_id)
        self.closed = False
        self.docker = self.client
        self.client = _LabellingClient(self.docker, self)
        reap_once(self.docker)

    def start_emulator(self, path_to_vm: str, headless: bool, os_type: str) -> None:
        """Run and boot a container (desktop-env's start) in a boot slot; a lock timeout is retried `lock_retries`
        times; a kept port found taken is chosen anew."""
        times = StartTimes()
        self.starts.append(times)
        begun = time.monotonic()
        try:
            slot = self.boot_slots.hold(lambda: self.closed)
        except Closed as exc:
            raise InfraFailure(str(exc)) from None
        times.slot_wait = time.monotonic() - begun
        try:
            self._start_in_slot(path_to_vm, headless, os_type, times)
        finally:
            if slot is not None:
                slot.release()

    def _start_in_slot(self, path_to_vm: str, headless: bool, os_type: str, times: StartTimes) -> None:
        if self.ports and not all(map(port_free, self.ports.values())):
            self._keep({})  # someone took one since the last start: choose again, under the lock
        for attempt in range(self.lock_retries + 1):
            _SPACER.wait(self.start_interval)
            if self.closed:  # checked after the wait too: the turn may come long after a close
                raise InfraFailure("the docker desktop was closed before its container started")
            try:
                return self._start_once(path_to_vm, headless, os_type, times)
            except filelock.Timeout:
                if attempt == self.lock_retries:
                    break
                pause = min(BACKOFF_CAP, upstream.LOCK_TIMEOUT / 10) * random.uniform(0.5, 1.0)
                logger.info("docker lock busy for %g s; retrying in %.1f s", upstream.LOCK_TIMEOUT, pause)
                time.sleep(pause)
        waits = f"{self.lock_retries + 1} x {upstream.LOCK_TIMEOUT:g} s"
        raise InfraFailure(
            f"desktop-env's docker lock {self.host_lock} stayed busy ({waits} waited); raise "
            "+cua.env.kwargs.docker_lock_timeout=SECONDS or +cua.env.kwargs.docker_lock_retries=N"
        )

    def _start_once(self, path_to_vm: str, headless: bool, os_type: str, times: StartTimes) -> None:
        """desktop-env's start: under the host lock when ports are to be chosen, else under this desktop's own; a
        port docker finds taken (another host process got it between our choice and our run) is chosen anew, once."""
        for last in (False, True):
            kept = bool(self.ports)
            self.lock_file = self.own_lock if kept else self.host_lock  # the host lock guards only port choice
            self._scan = None
            self._entered = time.monotonic()
            self._locked = None
            try:
                super().start_emulator(path_to_vm, headless, os_type)
                return
            except upstream.docker.errors.APIError as exc:
                if last or not any(text in str(exc).lower() for text in PORT_TAKEN):
                    raise
                logger.info("a port of docker desktop %s was taken (%s); choosing new ports", self.env_id, exc)
                self._keep({})
                remove_labelled(self.docker, {ENV: self.env_id})  # docker leaves the container it could not start
            finally:
                self.lock_file = self.host_lock
                self._stamp_lock(times, host=not kept)

    def _keep(self, ports: dict[int, int]) -> None:
        """This desktop's kept ports, also in the process's register (which a first start's scan leaves out)."""
        with _KEPT_LOCK:
            _KEPT.difference_update(self.ports.values())
            self.ports = ports
            _KEPT.update(ports.values())

    def _get_available_port(self, start_port: int) -> int:
        """The port kept for `start_port`; at a first start, chosen from one scan of the host (not one per port)."""
        if self._locked is None:
            self._locked = time.monotonic()  # desktop-env calls this first thing under its lock
        if start_port in self.ports:
            return self.ports[start_port]
        if self._scan is None:  # what the host uses, and the ports this process's desktops keep while their VMs
            self._scan = set(self._get_used_ports())  # are down (a reset between its stop and its run)
            with _KEPT_LOCK:
                self._scan |= _KEPT
            self.starts[-1].port_scans += 1
        port = start_port
        while port in self._scan or port in self.ports.values():
            port += 1
            if port >= 65354:  # desktop-env's own ceiling
                raise upstream.PortAllocationError(f"No available ports found starting from {start_port}")
        self._keep({**self.ports, start_port: port})
        return port

    def _stamp_lock(self, times: StartTimes, host: bool) -> None:
        """Add this attempt's wait for and hold of the host lock (to its run's end, or now when it ended before) to
        `times`; nothing for a start under the desktop's own lock."""
        if host and self._locked is not None:
            times.lock_wait += self._locked - self._entered
            times.lock_hold += (self._ran or time.monotonic()) - self._locked
        elif host:
            times.lock_wait += time.monotonic() - self._entered
        self._locked = self._ran = None

    def _wait_for_vm_ready(self, timeout: float | None = None) -> bool:
        """desktop-env's readiness wait for `docker_boot_timeout` seconds (desktop-env's is a fixed 300 s), in
        slices of `READY_SLICE`: a desktop closed meanwhile stops waiting (and gives back its boot slot) at once."""
        booted, since = time.monotonic(), upstream.time.time()  # the slices count on desktop-env's own clock
        timeout = self.boot_timeout if timeout is None else timeout
        try:
            while True:
                left = timeout - (upstream.time.time() - since)
                try:
                    return super()._wait_for_vm_ready(max(0.001, min(READY_SLICE, left)))
                except TimeoutError:
                    if self.closed:
                        raise InfraFailure("the docker desktop was closed while its VM booted") from None
                    if left <= READY_SLICE:
                        raise TimeoutError(
                            f"VM failed to become ready within {timeout:g} s (docker_boot_timeout; "
                            "`verl-cua probe-boots` measures this host's boots)"
                        ) from None
        finally:
            self.starts[-1].boot = time.monotonic() - booted

    def close(self) -> None:
        """Start no more containers and remove every container of this desktop (by its label)."""
        self.closed = True
        self._keep({})
        self.own_lock.unlink(missing_ok=True)
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
        self._provider._ran = time.monotonic()  # desktop-env lets go of its lock right after this returns
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
_KEPT: set[int] = set()  # host ports the docker desktops of this process keep
_KEPT_LOCK = threading.Lock()
_PROCESS_RUN = f"{socket.gethostname()}-{os.getpid()}-{int(time.time())}"
_reap_lock = threading.Lock()
_reaped = False
