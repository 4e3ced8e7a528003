"""Chaos for CPU training runs: a thread that SIGKILLs a run's browsers, desktops and Ray env actors on a seeded
schedule, only among the processes descended from the run it watches, and logs every kill.

Each kill of the schedule waits for a target that appeared after the previous kill (a freshly built env is leased:
an episode is running on it), then a seeded delay, then kills it. The thread also records every process of the run
it has seen, so a test can ask which of them outlive the run. Targets: `browser` (the Chromium that chromedriver
started), `chromedriver`, `desktop` (any process of a local desktop naming Xvfb, soffice or its server: bubblewrap
included; only a desktop an episode is on, not the spare one the env boots ahead of the next episode) and
`ray_env_actor` (an `EnvPool(backend="ray")` actor)."""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

# what each kind of target is, by process name or command line (a desktop's infra binaries are renamed copies)
TARGETS: dict[str, tuple[str, ...]] = {
    "browser": ("chromium", "chrome"),
    "chromedriver": ("chromedriver",),
    "desktop": ("Xvfb", "soffice", "desktop_server.py"),
    "ray_env_actor": ("ray::_EnvActor",),
}
# what a local desktop's launcher starts for every desktop, the spare one booted ahead of the next episode included:
# any other child of the launcher (a task's app, the agent's action) means an episode is on that desktop
DESKTOP_SESSION = ("dbus-daemon", "openbox")
DESKTOP_LAUNCHER = "desktop_launcher.py"
# every process of an env that must not outlive the run (the leak check)
ENV_PROCESSES = ("chromium", "chromedriver", "chrome", "Xvfb", "soffice", "desktop_server.py", "bwrap", "openbox")


@dataclass(frozen=True)
class Kill:
    """One kill: seconds since the chaos started, the kind asked for, and the process killed (pid 0: none found)."""

    at: float
    kind: str
    pid: int
    name: str


def schedule(seed: int, kinds: Iterable[str], delay: tuple[float, float] = (0.5, 2.5)) -> list[tuple[str, float]]:
    """The seeded kill schedule: one (kind, delay after its target appears) per entry of `kinds`, in that order."""
    kinds = list(kinds)
    unknown = sorted(set(kinds) - set(TARGETS))
    if unknown:
        raise ValueError(f"unknown chaos target {unknown[0]!r}; valid targets: {', '.join(TARGETS)}")
    rng = random.Random(seed)
    return [(kind, round(rng.uniform(*delay), 3)) for kind in kinds]


def matches(proc: psutil.Process, patterns: Iterable[str]) -> bool:
    """Whether `proc`'s name or command line contains one of `patterns`."""
    try:
        text = " ".join([proc.name(), *proc.cmdline()])
    except psutil.Error:
        return False
    return any(p in text for p in patterns)


class Chaos(threading.Thread):
    """Kills per `plan` (from `schedule`) among the descendants of `root_pid`; `kills` and `seen` tell what it did."""

    def __init__(
        self, root_pid: int, plan: list[tuple[str, float]], seed: int, log: Path | None = None, wait_s: float = 600.0
    ):
        super().__init__(daemon=True, name="verl-cua-chaos")
        self.root_pid, self.plan, self.log, self.wait_s = root_pid, plan, log, wait_s
        self._rng = random.Random(seed + 1)
        self._halt = threading.Event()
        self._start = time.monotonic()
        self.kills: list[Kill] = []
        self.seen: dict[int, tuple[float, str]] = {}  # pid -> (create time, name): every process of the run seen

    def stop(self) -> None:
        """Stop after the current poll; no further kills."""
        self._halt.set()
        self.join(timeout=10)

    def descendants(self) -> list[psutil.Process]:
        """The run's processes now, recorded in `seen`: the root's descendants, and those of processes seen before
        (a process whose parent died is re-parented out of the root's tree, and so are the children it starts)."""
        children: dict[int, list[psutil.Process]] = {}
        created: dict[int, float] = {}
        for proc in psutil.process_iter(["ppid", "create_time"]):
            children.setdefault(proc.info["ppid"], []).append(proc)
            created[proc.pid] = proc.info["create_time"]
        alive_seen = [pid for pid, (when, _) in self.seen.items() if created.get(pid) == when]  # not a reused pid
        frontier, found = [self.root_pid, *alive_seen], {}
        while frontier:
            for proc in children.get(frontier.pop(), []):
                if proc.pid not in found and proc.pid != self.root_pid:
                    found[proc.pid] = proc
                    frontier.append(proc.pid)
        for proc in found.values():
            with contextlib.suppress(psutil.Error):
                name = " ".join([proc.name(), *proc.cmdline()])[:200]
                self.seen.setdefault(proc.pid, (proc.info["create_time"], name))
        return list(found.values())

    def run(self) -> None:
        known: set[int] = set()
        for kind, delay in self.plan:
            target = self._wait_for_new(kind, known)
            if self._halt.is_set():
                return
            if target is None:
                self._record(Kill(self._now(), kind, 0, f"(no new target in {self.wait_s:g}s)"))
                continue
            if self._halt.wait(delay):
                return
            self._kill(kind, target)
            known.update(p.pid for p in self.descendants() if matches(p, TARGETS[kind]))
        while not self._halt.wait(0.5):  # keep recording the run's processes for `survivors`
            self.descendants()

    def _wait_for_new(self, kind: str, known: set[int]) -> psutil.Process | None:
        """A decisive target of `kind` no earlier kill saw (chosen with the seeded rng); None after `wait_s`."""
        deadline = time.monotonic() + self.wait_s
        while not self._halt.is_set() and time.monotonic() < deadline:
            procs = self.descendants()
            fresh = sorted((p for p in procs if p.pid not in known and _decisive(kind, p)), key=lambda p: p.pid)
            if fresh:
                return self._rng.choice(fresh)
            self._halt.wait(0.2)
        return None

    def _now(self) -> float:
        return round(time.monotonic() - self._start, 3)

    def _record(self, kill: Kill) -> None:
        self.kills.append(kill)
        if self.log is not None:
            with self.log.open("a") as f:
                f.write(json.dumps(asdict(kill)) + "\n")

    def _kill(self, kind: str, proc: psutil.Process) -> None:
        try:
            name = " ".join([proc.name(), *proc.cmdline()])[:120]
            proc.kill()
        except psutil.Error:
            name = "(gone before the kill)"
        self._record(Kill(self._now(), kind, proc.pid, name))

    def kill_survivors(self) -> list[str]:
        """SIGKILL the env processes of the run still alive (a test's cleanup); returns what it killed."""
        alive = self.survivors()
        for line in alive:
            with contextlib.suppress(psutil.Error):
                psutil.Process(int(line.split()[0])).kill()
        return alive

    def survivors(self, patterns: Iterable[str] = ENV_PROCESSES) -> list[str]:
        """Env processes of the run seen by the thread that are still alive (same pid and create time)."""
        alive = []
        for pid, (created, name) in self.seen.items():
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE and matches(proc, patterns):
                    alive.append(f"{pid} {name}")
            except psutil.Error:
                continue
        return alive


def _decisive(kind: str, proc: psutil.Process) -> bool:
    """Whether killing `proc` breaks its env: the browser chromedriver started (not a renderer or helper, which
    Chromium may replace), chromedriver, a desktop's Xvfb, server or office suite (of a desktop an episode is on), a
    Ray env actor."""
    if not matches(proc, TARGETS[kind]):
        return False
    if kind == "desktop":
        return _in_episode(proc)
    if kind != "browser":
        return True
    try:
        parent = proc.parent()
        return parent is not None and "chromedriver" in parent.name()
    except psutil.Error:
        return False


def _in_episode(proc: psutil.Process) -> bool:
    """Whether the desktop `proc` belongs to has an episode on it: its sandbox (the outermost bwrap above it) runs a
    child of the launcher beyond `DESKTOP_SESSION`. A desktop the env booted ahead of its next episode runs none, and a
    kill there is absorbed (the env boots another) rather than failing an episode. A process in no sandbox: True."""
    try:
        sandbox = None
        for above in [proc, *proc.parents()]:
            if above.name() == "bwrap":
                sandbox = above
        if sandbox is None:
            return True
        for inside in sandbox.children(recursive=True):  # bwrap's own command line names the launcher too
            if inside.name() != "bwrap" and any(arg.endswith(DESKTOP_LAUNCHER) for arg in inside.cmdline()):
                return any(child.name() not in DESKTOP_SESSION for child in inside.children())
    except psutil.Error:
        return False
    return False
