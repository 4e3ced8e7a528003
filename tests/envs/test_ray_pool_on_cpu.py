"""The Ray pool backend on a local Ray cluster: envs in actors placed by the desktop-host resource, real
MiniWoB browsers inside, and the same infra-failure contract as the thread backend."""

import functools
import os
import shutil
import signal
import tempfile

import pytest

from verl_cua.envs import EnvPool, make_env
from verl_cua.envs.ray_backend import RayEnv
from verl_cua.testing.miniwob_oracle import solution

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray(chromium) -> str:
    """A local Ray cluster whose actors' TMPDIR is a folder of this module's own (returned), so counting browser
    files there sees no other test's browsers; short, as Chromium's socket paths live in it."""
    temp = tempfile.mkdtemp(prefix="cua-ray-")
    ray.init(num_cpus=4, resources={"verl_cua_desktop:local": 4}, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"TMPDIR": temp}})  # fmt: skip
    yield temp
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


# a partial of library code: Ray workers import it by reference (a test-module function would not resolve there)
factory = functools.partial(make_env, "miniwob", task="click-button", action_format="pyautogui")


def solve(lease, task):
    obs = lease.reset(task)
    result = None
    for text in lease.env.apply(lambda env: solution(env, obs)):  # the DOM lives in the actor
        result = lease.step(text)
    return result.reward, lease.evaluate(), lease.infra_failure


def _browser_files(temp: str) -> set[str]:
    """Non-empty browser temp dirs (profiles, sockets) in the actors' `temp`; a killed ChromeDriver's empty scratch dir
    is not counted."""
    return {n for n in os.listdir(temp) if n.startswith("org.chromium.") and os.listdir(os.path.join(temp, n))}


def test_episodes_run_in_actors_on_the_desktop_host(local_ray):
    before = _browser_files(local_ray)
    with EnvPool(factory, 2, backend="ray", hosts=["local"]) as pool:
        with pool.acquire() as lease:
            assert isinstance(lease.env, RayEnv)
            assert os.getpid() not in lease.env.pids()
        assert pool.map(solve, ["click-button", "enter-text", "click-test"]) == [(1.0, 1.0, False)] * 3
        assert _browser_files(local_ray) - before  # the actors' browsers have their profiles in this host's temp dir
    assert _browser_files(local_ray) - before == set()  # closing the pool kills the actors' browsers and removes them


def test_killed_browser_in_an_actor_is_an_infra_failure_and_recovers(local_ray):
    with EnvPool(factory, 1, backend="ray", hosts=["local"], step_timeout=20) as pool:
        lease = pool.acquire()
        lease.reset("click-test")
        for pid in lease.env.pids()[1:]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        result = lease.step("WAIT")
        assert result.info["infra_failure"] and lease.evaluate() == 0.0
        lease.release()
        assert solve(pool.acquire(), "click-test") == (1.0, 1.0, False)
        assert pool.stats()["restarts"] == 1


def test_unplaceable_env_is_an_infra_failure_not_a_hang(local_ray):
    with EnvPool(factory, 1, backend="ray", hosts=["no-such-host"], start_timeout=5, start_retries=0) as pool:
        with pool.acquire() as lease:
            obs = lease.reset("click-test")
            assert obs.extra["infra_failure"] and "start" in obs.extra["error"]


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid backends: thread, ray"):
        EnvPool(factory, 1, backend="dask")
