"""EnvPool over real MiniWoB browsers: parallel episodes, and faults (killed or frozen browser) that become
infra failures instead of exceptions, with the pool rebuilding the env for the next episode."""

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
        assert pool.stats() == {"size": 2, "alive": 2, "restarts": 0, "infra_failures": 0}


def _browser_pids(env):
    return [p for p in env.pids()[1:] if psutil.pid_exists(p)]


def test_killed_browser_is_an_infra_failure_and_the_pool_recovers(chromium):
    with EnvPool(factory, 1, step_timeout=20) as pool:
        lease = pool.acquire()
        obs = lease.reset("click-button")
        move = solution(lease.env, obs)[0]
        for pid in _browser_pids(lease.env):
            os.kill(pid, signal.SIGKILL)
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
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
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
