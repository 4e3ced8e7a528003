"""32 docker desktops at once through our EnvPool, with a FAKE Docker client (no Docker engine on CPU CI).

Real: desktop-env's DockerProvider (its host-wide file lock, port scan, `containers.run`, readiness polling, revert),
DesktopEnv and its controllers over HTTP, our OSWorldEnv, EnvService and EnvPool. Fake (`verl_cua.testing.fake_docker`):
`docker.from_env()` returns a client whose `containers.run(...)` takes `RUN_S` under the lock (as docker does) and
serves, in place of the VM, a stdlib HTTP server on the mapped host port that answers 503 for `BOOT_S`, then
screenshots. Times are scaled down: a lock hold of ~0.05 s stands for docker's 1-3 s, so desktop-env's 10 s lock wait
becomes `UPSTREAM_LOCK_S`.
"""

import itertools
import os
import socket
import subprocess
import threading
import time

import filelock
import pytest

from verl_cua.envs import EnvPool, InfraFailure, make_env

docker_provider = pytest.importorskip("desktop_env.providers.docker.provider")
from verl_cua.envs.osworld import docker_fleet  # noqa: E402  (needs desktop-env)
from verl_cua.integrations.verl.env_service import EnvService  # noqa: E402
from verl_cua.testing import fake_docker  # noqa: E402
from verl_cua.testing.fake_docker import FakeDockerClient  # noqa: E402

DESKTOPS = 32
UPSTREAM_LOCK_S = 0.25  # desktop-env's 10 s lock wait, scaled like the lock hold
SCALED = {"docker_lock_timeout": 30.0, "docker_lock_retries": 1, "docker_start_interval": 0.01}
UPSTREAM = {"docker_lock_timeout": UPSTREAM_LOCK_S, "docker_lock_retries": 0, "docker_start_interval": 0,
            "docker_boot_batch": 0}  # fmt: skip
TASK = fake_docker.USED_TASK  # its setup marks the desktop used: the next reset restarts it


@pytest.fixture
def client(tmp_path, monkeypatch):
    """A fake docker client behind desktop-env's real provider; its lock file in tmp_path, its polls scaled down."""
    fake = fake_docker.install(monkeypatch, tmp_path, FakeDockerClient())
    yield fake
    for container in list(fake.existing):  # a failing test leaves no servers behind
        container.remove(force=True)


def _kwargs(**options) -> dict:
    return {"provider": "docker", "path_to_vm": "Ubuntu.qcow2", "pause": 0, "screen": (64, 40), **options}


def _reset_all(pool: EnvPool) -> list[bool]:
    """Reset every desktop of the pool at once; each one's infra_failure."""

    def reset(lease, task):
        lease.reset(task)
        return lease.infra_failure

    return pool.map(reset, [TASK] * pool.size)


def test_32_desktops_start_and_reset_together_with_a_fake_docker_client(client):
    service = EnvService(
        {"name": "osworld", "kwargs": _kwargs(**SCALED), "pool_size": DESKTOPS, "reset_timeout": 60.0,
         "step_timeout": 60.0, "evaluate_timeout": 60.0}
    )  # fmt: skip
    pool = service.pool
    # the pool waits for every lock wait, this process's spaced starts and desktop-env's 300 s boot wait
    assert pool.start_timeout >= 2 * SCALED["docker_lock_timeout"] + docker_fleet.BOOT_TIMEOUT >= 300
    assert pool.reset_timeout == pool.start_timeout > 60.0  # a reset runs a new container: the same waits
    try:
        pool.warm()  # 32 first starts at once, queued on desktop-env's file lock
        assert len(client.runs) == DESKTOPS and pool.stats()["alive"] == DESKTOPS
        assert docker_provider.LOCK_TIMEOUT == SCALED["docker_lock_timeout"]
        assert not any(_reset_all(pool))  # clean containers: setup only, then marked used
        assert not any(_reset_all(pool))  # used: 32 stops and 32 new containers through the lock at once
        assert len(client.runs) == 2 * DESKTOPS and len(client.ours()) == DESKTOPS
        assert pool.stats()["infra_failures"] == 0 and pool.stats()["restarts"] == 0
        ports = [c.kwargs["ports"][5000] for c in client.ours()]
        assert len(set(ports)) == DESKTOPS
        run, pid = docker_fleet.run_id(), str(os.getpid())
        assert all(c.labels["verl-cua.run"] == run and c.labels["verl-cua.owner-pid"] == pid for c in client.runs)
    finally:
        pool.close()
    assert client.existing == []  # every container of the run removed, none leaked


def test_desktop_envs_10_s_lock_wait_scaled_down_fails_most_of_32_starts_with_a_fake_docker_client(client, tmp_path):
    """Why: with desktop-env's own semantics (one wait, no retry, no spacing), most of a first wave is masked."""
    pool = EnvPool(lambda: make_env("osworld", **_kwargs(**UPSTREAM)), DESKTOPS, start_timeout=30.0, start_retries=0)
    try:
        pool.warm()
        failed = pool.stats()["infra_failures"]
        assert failed >= DESKTOPS // 2, f"only {failed} of {DESKTOPS} starts timed out on the lock"
        lock = tmp_path / "docker_port_allocation.lck"
        assert f"docker lock {lock} stayed busy (1 x {UPSTREAM_LOCK_S:g} s waited)" in pool.last_errors[-1]
    finally:
        pool.close()
    assert client.existing == []


def _hold_lock(path, seconds: float) -> threading.Thread:
    """Someone else holds desktop-env's lock for `seconds` (from its own thread: filelock's locks are per thread)."""
    taken = threading.Event()

    def hold():
        with filelock.FileLock(str(path)):
            taken.set()
            time.sleep(seconds)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    taken.wait(5)
    return holder


def test_a_lock_timeout_is_retried_with_a_fake_docker_client(client, tmp_path):
    lock = tmp_path / "docker_port_allocation.lck"
    holder = _hold_lock(lock, 0.6)  # longer than one wait of 0.4 s
    with pytest.raises(InfraFailure, match=r"docker lock .* stayed busy \(1 x 0.4 s waited\)"):
        make_env("osworld", **_kwargs(docker_lock_timeout=0.4, docker_lock_retries=0))
    assert client.runs == []
    holder.join()
    _hold_lock(lock, 0.6)
    env = make_env("osworld", **_kwargs(docker_lock_timeout=0.4, docker_lock_retries=2))
    try:
        assert env.healthy() and len(client.ours()) == 1
    finally:
        env.close()
    assert client.existing == []


def test_a_start_that_ends_after_the_pools_timeout_is_closed_with_a_fake_docker_client(client):
    client.boot_s = 1.5  # booting outlasts the pool's start timeout
    pool = EnvPool(lambda: make_env("osworld", **_kwargs(**SCALED)), 1, start_timeout=0.5, start_retries=0)
    try:
        pool.warm()
        assert pool.stats()["alive"] == 0 and pool.stats()["infra_failures"] == 1
        deadline = time.monotonic() + 15
        while not client.runs and time.monotonic() < deadline:  # the start goes on after the pool gave up
            time.sleep(0.05)
        assert len(client.runs) == 1  # nobody's to close but the late start's own
        while client.existing and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.existing == [] and client.runs[0].removed
    finally:
        pool.close()


def test_containers_of_an_exited_owner_are_reaped_at_the_next_start_with_a_fake_docker_client(client):
    exited = subprocess.Popen(["true"])
    exited.wait()
    host, me = socket.gethostname(), docker_fleet.owner_labels("earlier")
    dead = client.add({**me, "verl-cua.owner-pid": str(exited.pid)})
    reused = client.add({**me, "verl-cua.owner-started": "1.00"})  # our pid, but an earlier process's start time
    alive = client.add(dict(me))  # this process: a live run's desktop
    elsewhere = client.add({**me, "verl-cua.owner-pid": str(exited.pid), "verl-cua.host": host + "-other"})
    foreign = client.add({"com.example.app": "db"})
    env = make_env("osworld", **_kwargs(**SCALED))
    try:
        assert dead.removed and reused.removed
        assert not (alive.removed or elsewhere.removed or foreign.removed)
        assert len(client.ours()) == 3  # the new desktop, the live run's and the other host's
        later = client.add({**me, "verl-cua.owner-pid": str(exited.pid)})
        make_env("osworld", **_kwargs(**SCALED)).close()  # the reaper runs at a process's first desktop only
        assert not later.removed
    finally:
        env.close()
    assert client.existing == [alive, elsewhere, foreign, later]


def test_the_reaper_judges_owners_only_in_its_own_pid_namespace_and_boot_with_a_fake_docker_client(client):
    """A pod sharing the host name has other pids: its live desktops stay. A container of an earlier boot goes,
    whatever its pid now names."""
    exited = subprocess.Popen(["true"])
    exited.wait()
    me = docker_fleet.owner_labels("earlier")
    other_pod = client.add({**me, "verl-cua.owner-pid": str(exited.pid), "verl-cua.pid-ns": "pid:[1]"})
    before_reboot = client.add({**me, "verl-cua.boot": "an-earlier-boot"})  # our live pid, but not this boot's
    env = make_env("osworld", **_kwargs(**SCALED))
    try:
        assert before_reboot.removed and not other_pod.removed
    finally:
        env.close()
    assert client.existing == [other_pod]


def test_close_while_the_container_starts_removes_it_with_a_fake_docker_client(client):
    env = make_env("osworld", **_kwargs(**SCALED))
    provider = env.docker
    env.close()
    assert client.existing == [] and provider.closed
    with pytest.raises(InfraFailure, match="closed before its container started"):
        provider.start_emulator("Ubuntu.qcow2", True, "Ubuntu")
    provider.closed = False
    run = client.run

    def close_during_run(image, **kwargs):  # close() lists the containers before docker has made this one
        provider.close()
        return run(image, **kwargs)

    client.run = close_during_run
    with pytest.raises(InfraFailure, match="closed while its container started"):
        provider.start_emulator("Ubuntu.qcow2", True, "Ubuntu")
    assert client.existing == []


def test_starts_of_one_process_are_spaced_apart():
    spacer, starts = docker_fleet._Spacer(), []

    def start():
        spacer.wait(0.1)
        starts.append(time.monotonic())

    threads = [threading.Thread(target=start) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    gaps = [b - a for a, b in itertools.pairwise(sorted(starts))]
    assert len(gaps) == 4 and min(gaps) >= 0.09


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"docker_lock_timeout": 0}, "docker_lock_timeout must be > 0"),
        ({"docker_lock_retries": 1.5}, "docker_lock_retries must be a whole number"),
        ({"docker_start_interval": "1"}, "docker_start_interval must be a number >= 0"),
    ],
)
def test_bad_docker_options_are_one_line_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        make_env("osworld", **_kwargs(**bad))


def test_docker_options_are_refused_for_other_providers():
    with pytest.raises(ValueError, match="docker_lock_timeout: for provider='docker' only, not 'vmware'"):
        make_env("osworld", provider="vmware", docker_lock_timeout=60)
