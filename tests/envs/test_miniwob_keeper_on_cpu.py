"""The browser's keeper in real headless Chromium: no browser process outlives its owner (SIGKILLed included) or its
chromedriver, and the keeper kills nothing outside its own process group and marked crash handlers."""

import json
import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from verl_cua.envs import make_env
from verl_cua.envs.miniwob import CHROMEDRIVER, KEEPER

DEADLINE_S = 10.0


@pytest.fixture
def bystander():
    """A sleeping process of the owner's (this test's) own group: nothing the keeper does may touch it."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    assert proc.poll() is None, "the keeper killed a process outside its group"
    proc.kill()
    proc.wait()


def _processes(pids: list[int]) -> list[psutil.Process]:
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))  # remembers the start time: a reused PID is not mistaken for it
        except psutil.NoSuchProcess:
            pass
    return procs


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    return alive


def _cmdline(proc: psutil.Process) -> str:
    """The process's command line, or "" once it has exited (a zombie no one has reaped yet has none)."""
    try:
        return " ".join(proc.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return ""


def _wait_dead(procs: list[psutil.Process]) -> list[psutil.Process]:
    deadline = time.monotonic() + DEADLINE_S
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(procs)


def _named(procs: list[psutil.Process], name: str) -> list[psutil.Process]:
    return [p for p in procs if p.name() == name]


def _stop_crash_handlers(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Freeze Chromium's crash handlers (they leave the group), so only the keeper's mark can end them."""
    handlers = _named(procs, "chrome_crashpad_handler")
    for proc in handlers:
        proc.suspend()
    return handlers


def test_the_keeper_leads_a_group_of_chromedriver_and_the_browser(chromium):
    env = make_env("miniwob", task="click-test", action_format="pyautogui")
    try:
        env.reset("click-test")
        pids = env.pids()
        keeper = env._instance().driver.service.process.pid
        assert pids[0] == keeper and os.getpgid(keeper) == keeper == os.getsid(keeper)
        procs = _processes(pids)
        assert _named(procs, "chromedriver") and len(_named(procs, "chromium")) >= 3
        assert os.getpid() not in pids and os.getpgrp() not in pids
        escaped = [p for p in procs if os.getpgid(p.pid) != keeper]
        assert escaped and {p.name() for p in escaped} == {"chrome_crashpad_handler"}
    finally:
        env.close()


OWNER = """
import json, subprocess, sys, time
from verl_cua.envs import make_env
bystander = subprocess.Popen(["sleep", "600"])
env = make_env("miniwob", task="click-test", action_format="pyautogui")
env.reset("click-test")
print(json.dumps({"pids": env.pids(), "bystander": bystander.pid, "temporary": env._temporary}), flush=True)
time.sleep(600)
"""


def test_a_sigkilled_owner_takes_its_browser_along(chromium, bystander):
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(OWNER)], stdout=subprocess.PIPE, text=True)
    try:
        report = json.loads(owner.stdout.readline())
        procs = _processes(report["pids"])
        frozen = _stop_crash_handlers(procs)
        owners_bystander = psutil.Process(report["bystander"])
        assert len(procs) >= 8 and frozen
        owner.kill()
        owner.wait()
        assert _wait_dead(procs) == []
        assert owners_bystander.is_running() and owners_bystander.status() != psutil.STATUS_ZOMBIE
    finally:
        owner.kill()
        try:
            psutil.Process(report["bystander"]).kill()
        except (psutil.Error, NameError):
            pass


@pytest.mark.parametrize("fault", ["chromedriver SIGKILLed", "keeper SIGTERMed"])
def test_a_dead_chromedriver_takes_the_browser_along_and_is_an_infra_failure(chromium, bystander, fault):
    env = make_env("miniwob", task="click-test", action_format="pyautogui")
    try:
        env.reset("click-test")
        procs = _processes(env.pids())
        frozen = _stop_crash_handlers(procs)
        if fault == "chromedriver SIGKILLed":
            _named(procs, "chromedriver")[0].kill()
        else:
            procs[0].terminate()  # selenium's quit: SIGTERM to the process it started
        assert _wait_dead(procs) == [] and frozen
        assert env.healthy() is False
        result = env.step("WAIT")
        assert result.info["infra_failure"] and result.done and result.reward == 0.0
    finally:
        env.close()


def test_a_normal_close_leaves_no_process_and_no_profile(chromium, bystander):
    env = make_env("miniwob", task="click-test", action_format="pyautogui")
    env.reset("click-test")
    procs = _processes(env.pids())
    temporary = list(env._temporary)
    assert temporary and all(os.path.isdir(path) for path in temporary)
    env.close()
    assert _wait_dead(procs) == [] and env.pids() == []
    assert not any(os.path.exists(path) for path in temporary)


def test_the_users_own_chromedriver_runs_without_a_keeper(chromium, monkeypatch):
    monkeypatch.setenv("MINIWOB_CHROMEDRIVER", CHROMEDRIVER)
    env = make_env("miniwob", task="click-test", action_format="pyautogui")
    try:
        env.reset("click-test")
        procs = _processes(env.pids())
        assert procs[0].name() == "chromedriver" and procs[0].pid == env._instance().driver.service.process.pid
        assert KEEPER not in " ".join(_cmdline(p) for p in procs)
    finally:
        env.close()
    assert _wait_dead(procs) == []
