"""The chaos thread: a seeded schedule, kills only among the watched run's descendants, a log of each kill, and the
run's processes that outlive it."""

import functools
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from verl_cua.envs import EnvPool, make_env
from verl_cua.testing.chaos import TARGETS, Chaos, matches, schedule

SLEEPER = "import sys, time; time.sleep(60)"


def _spawn_tree(name: str) -> subprocess.Popen:
    """A parent process whose child's command line says `name` (what the chaos thread looks for); the parent's own
    command line does not (nor, then, its child's before exec)."""
    child = f"subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, os.environ['CHAOS_NAME']])"
    code = f"import os, subprocess, sys, time; {child}; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "CHAOS_NAME": name})


def _child(parent: subprocess.Popen) -> psutil.Process:
    deadline = time.monotonic() + 10
    while not (children := psutil.Process(parent.pid).children()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return children[0]


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (a killed child stays one until its parent reaps it)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_schedule_is_fixed_by_its_seed():
    assert schedule(3, ["browser", "desktop"]) == schedule(3, ["browser", "desktop"])
    assert schedule(3, ["browser"] * 4) != schedule(4, ["browser"] * 4)
    assert all(0.5 <= delay <= 2.5 for _, delay in schedule(3, ["desktop"] * 20))


def test_an_unknown_target_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid targets: browser, chromedriver, desktop, ray_env_actor"):
        schedule(0, ["vm"])


def test_it_kills_a_target_of_the_watched_run_only_and_logs_it(tmp_path):
    watched, outsider = _spawn_tree("Xvfb :99"), _spawn_tree("Xvfb :98")
    try:
        target, bystander = _child(watched), _child(outsider)
        chaos = Chaos(watched.pid, [("desktop", 0.1)], seed=1, log=tmp_path / "chaos.jsonl", wait_s=10)
        chaos.start()
        deadline = time.monotonic() + 10
        while _alive(target) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(target)
        assert _alive(bystander) and psutil.Process(watched.pid).is_running()
        chaos.stop()
        (kill,) = chaos.kills
        assert (kill.kind, kill.pid) == ("desktop", target.pid) and "Xvfb :99" in kill.name
        assert json.loads((tmp_path / "chaos.jsonl").read_text())["pid"] == target.pid
    finally:
        for proc in (watched, outsider):
            for child in psutil.Process(proc.pid).children():
                child.kill()
            proc.kill()


# A fake local desktop's sandbox, as `ps` shows the real one: bwrap > server > (Xvfb, launcher > dbus-daemon, openbox
# [, a task's app]). Each process sleeps; its name (comm) and command line are what the chaos thread reads.
FAKE_DESKTOP = """
import subprocess, sys, time
role, display, leased = sys.argv[1], sys.argv[2], sys.argv[3] == "leased"

def start(*args):
    return subprocess.Popen([sys.executable, __file__, *args])

if role == "run":  # bwrap's command line names the server and the launcher
    start("sandbox", display, sys.argv[3], "/run/server/desktop_server.py", "/run/server/desktop_launcher.py")
elif role == "sandbox":
    open("/proc/self/comm", "w").write("bwrap")
    start("server", display, sys.argv[3], "/run/server/desktop_server.py", "--dbus-config", "/run/dbus.conf")
elif role == "server":
    start("sleep", "Xvfb", display)
    start("launcher", display, sys.argv[3], "/run/server/desktop_launcher.py")
elif role == "launcher":
    for name in ("dbus-daemon", "openbox") + (("xterm",) if leased else ()):
        start("sleep", name, display)
else:
    open("/proc/self/comm", "w").write(sys.argv[2])
time.sleep(60)
"""


def _fake_desktops(tmp_path, *leased: bool) -> list[subprocess.Popen]:
    """One fake run per entry, each with one desktop (display :90, :91, ...), an episode on it where True."""
    script = tmp_path / "fake_desktop.py"
    script.write_text(FAKE_DESKTOP)
    return [subprocess.Popen([sys.executable, str(script), "run", f":{90 + i}", "leased" if on else "spare"])
            for i, on in enumerate(leased)]  # fmt: skip


def _tree(run: subprocess.Popen, count: int) -> list[psutil.Process]:
    """The run's processes once all `count` have started and taken their names."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        procs = psutil.Process(run.pid).children(recursive=True)
        names = {p.name() for p in procs}
        if len(procs) >= count and {"bwrap", "dbus-daemon", "openbox"} <= names:
            return procs
        time.sleep(0.05)
    raise AssertionError(f"the fake desktop did not start: {procs}")


def _end(runs: list[subprocess.Popen]) -> None:
    for run in runs:
        for proc in psutil.Process(run.pid).children(recursive=True):
            proc.kill()
        run.kill()


def test_a_desktop_kill_takes_the_desktop_an_episode_is_on_not_the_spare(tmp_path):
    """The spare desktop the env boots ahead of the next episode is no target: killing it costs no episode (the env
    boots another), so a kill there would be absorbed and the run's infra count would not show it."""
    spare, leased = runs = _fake_desktops(tmp_path, False, True)
    try:
        spare_tree, leased_tree = _tree(spare, 6), _tree(leased, 7)
        assert [p for p in spare_tree if matches(p, TARGETS["desktop"])], spare_tree  # targets, but no episode
        chaos = Chaos(spare.pid, [("desktop", 0.1)], seed=1, wait_s=1.5)  # the spare alone: no target
        chaos.start()
        time.sleep(2.5)
        chaos.stop()
        assert [(k.kind, k.pid) for k in chaos.kills] == [("desktop", 0)]
        assert all(p.is_running() for p in spare_tree)
        chaos = Chaos(leased.pid, [("desktop", 0.1)], seed=1, wait_s=10)
        chaos.start()
        deadline = time.monotonic() + 10
        while not chaos.kills and time.monotonic() < deadline:
            time.sleep(0.05)
        chaos.stop()
        (kill,) = chaos.kills
        assert kill.pid in {p.pid for p in leased_tree}, (kill, leased_tree)
    finally:
        _end(runs)


def test_a_target_that_never_appears_is_logged_as_none(tmp_path):
    watched = _spawn_tree("not-a-target")
    try:
        chaos = Chaos(watched.pid, [("ray_env_actor", 0.1)], seed=1, wait_s=0.5)
        chaos.start()
        time.sleep(1.5)
        chaos.stop()
        assert [(k.kind, k.pid) for k in chaos.kills] == [("ray_env_actor", 0)]
    finally:
        for child in psutil.Process(watched.pid).children():
            child.kill()
        watched.kill()


def test_survivors_are_the_runs_env_processes_still_alive():
    watched = _spawn_tree("Xvfb :97")
    try:
        child = _child(watched)
        chaos = Chaos(watched.pid, [], seed=1)
        chaos.descendants()
        assert [line.split()[0] for line in chaos.survivors()] == [str(child.pid)]
        watched.kill()  # the child is orphaned, not ended: still a survivor of the run
        watched.wait()
        assert chaos.kill_survivors()
        deadline = time.monotonic() + 10
        while chaos.survivors() and time.monotonic() < deadline:  # SIGKILL lands asynchronously
            time.sleep(0.05)
        assert not chaos.survivors()
    finally:
        watched.kill()


# a partial of library code: Ray workers import it by reference (a test-module function would not resolve there)
miniwob = functools.partial(make_env, "miniwob", task="click-test", action_format="pyautogui")


@pytest.mark.e2e
def test_a_killed_ray_env_actor_is_an_infra_failure_and_leaves_no_browser(chromium):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, resources={"verl_cua_desktop:local": 2}, include_dashboard=False, log_to_driver=False)
    chaos = Chaos(os.getpid(), schedule(25, ["ray_env_actor"]), seed=25, wait_s=60)
    try:
        with EnvPool(miniwob, 1, backend="ray", hosts=["local"], reset_timeout=30, step_timeout=20) as pool:
            lease = pool.acquire()
            lease.reset("click-test")
            chaos.start()
            deadline = time.monotonic() + 60
            while not chaos.kills and time.monotonic() < deadline:
                time.sleep(0.1)
            (kill,) = chaos.kills
            assert kill.pid and "_EnvActor" in kill.name
            assert lease.step("WAIT").info["infra_failure"] and lease.evaluate() == 0.0
            lease.release()
            with pool.acquire() as again:  # the pool built a new actor
                again.reset("click-test")
                assert not again.infra_failure and pool.stats()["restarts"] == 1
        chaos.stop()
        time.sleep(2)
        leaked = chaos.survivors()
        assert not leaked, leaked  # the killed actor's chromedriver and browser went with it
    finally:
        chaos.stop()
        chaos.kill_survivors()
        ray.shutdown()
