"""EnvPool over real MiniWoB browsers: parallel episodes, and faults (killed or frozen browser) that become
infra failures instead of exceptions, with the pool rebuilding the env for the next episode."""

import contextlib
import os
import signal
import time

import psutil
import pytest

from verl_cua.envs import EnvPool, EnvUsageError, make_env
from verl_cua.testing.miniwob_oracle import solution


def factory():
    return make_env("miniwob", task="click-button", action_format="pyautogui")


def solve(lease, task):
    obs = lease.reset(task)
    result = None
    for text in solution(lease.env, obs):
        result = lease.step(text)
    return result.reward, lease.evaluate(), lease.infra_failure


def test_parallel_episodes_on_two_browsers(chromium):
    with EnvPool(factory, 2) as pool:
        results = pool.map(solve, ["click-button", "enter-text", "click-test", "click-button"])
        assert results == [(1.0, 1.0, False)] * 4
        assert pool.stats() == {
            "size": 2,
            "alive": 2,
            "parked": 0,
            "switches": 0,
            "restarts": 0,
            "infra_failures": 0,
            "desktop_broken": 0,
            "unscorable": 0,
        }


def _mixed_batch(keep_idle: int) -> tuple[set, dict]:
    """Four rounds of two episodes over a pool of 2, the rounds alternating two tasks (as a step's groups of
    click-test and click-button come one after the other): every browser seen (its keeper's pid and start time: one
    per browser start) and the pool's stats."""
    browsers = set()
    with EnvPool(lambda: make_env("miniwob", action_format="pyautogui"), 2, keep_idle=keep_idle) as pool:
        for seed, name in enumerate(["click-test", "click-button"] * 2):
            tasks = [{"task": name, "seed": seed}, {"task": name, "seed": seed + 10}]
            leases = [pool.acquire(task=task) for task in tasks]  # both held at once: the pool's two slots
            for lease, task in zip(leases, tasks, strict=True):
                obs = lease.reset(task)
                assert obs.extra["task"] == name and not lease.infra_failure
                keeper = psutil.Process(lease.env.pids()[0])
                browsers.add((keeper.pid, keeper.create_time()))
            for lease in leases:
                lease.release()
        stats = pool.stats()
    running = {b for b in browsers if _alive(*b)}
    assert not running, f"browsers outlived the pool's close (parked ones included): {running}"
    return browsers, stats


def _alive(pid: int, started: float) -> bool:
    """Whether the process `pid` that started at `started` still runs (not a later process given the same pid)."""
    try:
        return psutil.Process(pid).create_time() == started
    except psutil.NoSuchProcess:
        return False


def test_a_mixed_task_batch_reuses_its_browsers(chromium):
    # each task keeps its browsers: two leased, two parked, so a task switch swaps envs and starts no browser
    browsers, stats = _mixed_batch(keep_idle=2)
    assert len(browsers) == 4, browsers  # 2 tasks x 2 slots, each started once
    assert stats["switches"] == 6 and stats["parked"] == 2 and stats["restarts"] == 0
    # the negative control: with nothing parked every switch closes one browser and starts another
    restarted, stats = _mixed_batch(keep_idle=0)
    assert stats["switches"] == 6 and stats["parked"] == 0 and len(restarted) == 2 + 6


def _signal(pids, sig):
    """Send `sig` to each pid still there (a browser's children die with it while the loop runs)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _browser_pids(env):
    return [p for p in env.pids()[1:] if psutil.pid_exists(p)]


def test_killed_browser_is_an_infra_failure_and_the_pool_recovers(chromium):
    with EnvPool(factory, 1, step_timeout=20) as pool:
        lease = pool.acquire()
        obs = lease.reset("click-button")
        move = solution(lease.env, obs)[0]
        _signal(_browser_pids(lease.env), signal.SIGKILL)
        started = time.monotonic()
        result = lease.step(move)  # must not raise
        assert result.info["infra_failure"] and result.done and result.reward == 0.0
        assert lease.infra_failure and lease.evaluate() == 0.0
        lease.release()
        assert solve(pool.acquire(), "click-button") == (1.0, 1.0, False)
        assert time.monotonic() - started < 30
        stats = pool.stats()
        assert stats["restarts"] == 1 and stats["infra_failures"] >= 1


def test_frozen_browser_times_out_and_is_killed_and_rebuilt(chromium):
    with EnvPool(factory, 1, step_timeout=3) as pool:
        lease = pool.acquire()
        obs = lease.reset("click-button")
        move = solution(lease.env, obs)[0]
        frozen = lease.env.pids()
        _signal(frozen, signal.SIGSTOP)
        result = lease.step(move)
        assert result.info["infra_failure"] and "timed out" in result.info["error"]
        lease.release()  # kills the frozen processes by PID
        time.sleep(0.5)
        assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in frozen)
        assert solve(pool.acquire(), "click-test") == (1.0, 1.0, False)


def test_browser_that_cannot_start_gives_an_infra_observation(chromium, monkeypatch):
    monkeypatch.setenv("MINIWOB_CHROME_BINARY", "/nonexistent/chromium")
    pool = EnvPool(factory, 1, start_retries=0)
    with pool.acquire() as lease:
        obs = lease.reset("click-button")
        assert obs.extra["infra_failure"] and "apt-get install" in obs.extra["error"]
        assert lease.step("DONE").info["infra_failure"]
    monkeypatch.setenv("MINIWOB_CHROME_BINARY", "/usr/bin/chromium")
    assert solve(pool.acquire(), "click-test") == (1.0, 1.0, False)
    pool.close()


def test_caller_errors_are_raised_not_hidden_as_infra_failures(chromium):
    pool = EnvPool(lambda: make_env("miniwob"), 1)
    with pool.acquire() as lease:
        with pytest.raises(EnvUsageError, match="valid tasks"):
            lease.reset("no-such-task")
        lease.reset("click-test")
        with pytest.raises(EnvUsageError, match="no format"):
            lease.step("DONE")
        assert not lease.infra_failure
    assert pool.stats()["infra_failures"] == 0
    pool.close()


def test_pool_rejects_bad_size_and_times_out_when_exhausted(chromium):
    with pytest.raises(ValueError, match="positive integer"):
        EnvPool(factory, 0)
    with EnvPool(factory, 1) as pool:
        held = pool.acquire()
        with pytest.raises(TimeoutError, match="no free env"):
            pool.acquire(timeout=0.2)
        held.release()
        held.release()  # a second release is a no-op, not a second free slot
        with pytest.raises(EnvUsageError, match="released"):
            held.step("DONE")
        assert len(pool._free) == 1


class _SlowToStart:
    """An env of any kind whose constructor outlasts the pool's start timeout; records its close."""

    closed: list = []

    def __init__(self, start_s: float):
        time.sleep(start_s)

    def close(self):
        _SlowToStart.closed.append(self)


def test_an_env_built_after_its_start_timeout_is_closed_not_leaked():
    _SlowToStart.closed = []
    starts = [0.6, 0.0]  # the first start outlasts the 0.2 s timeout; the retry is quick
    pool = EnvPool(lambda: _SlowToStart(starts.pop(0)), 1, start_timeout=0.2, start_retries=1)
    pool.warm()
    kept = pool._slots[0].env
    assert isinstance(kept, _SlowToStart) and pool.stats()["infra_failures"] == 1
    deadline = time.monotonic() + 5
    while not _SlowToStart.closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(_SlowToStart.closed) == 1 and _SlowToStart.closed[0] is not kept  # the late one, not the slot's
    pool.close()
    assert _SlowToStart.closed[-1] is kept
