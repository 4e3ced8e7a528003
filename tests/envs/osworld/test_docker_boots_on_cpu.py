"""Boots planned, at 32 docker desktops, with a FAKE Docker client (`verl_cua.testing.fake_docker`; no Docker engine
on CPU CI) behind desktop-env's real DockerProvider, DesktopEnv, our OSWorldEnv and EnvPool.

- ports are chosen by one scan at a desktop's first start and kept across its resets: no scan, and no host lock, at a
  reset (desktop-env scans four times per start: the negative control); a kept port someone took is chosen anew;
- `docker_boot_batch` bounds the boots at once host-wide (unbounded, more boot at once: the negative control);
- `docker_boot_timeout` is the readiness wait; the pool's start bound counts the batches before a start;
- `verl-cua probe-boots` boots 32, reports percentiles and lock holds, suggests settings, and leaves no container,
  also when stopped with Ctrl-C.
The lock hold is timed at 32 starts; the fake's `containers.list()` costs time per container, as docker's does.
"""

import _thread
import socket
import threading
import time

import pytest

from verl_cua.envs import EnvPool, InfraFailure, make_env

docker_provider = pytest.importorskip("desktop_env.providers.docker.provider")
from verl_cua.envs.osworld import boot_probe, docker_fleet  # noqa: E402  (needs desktop-env)
from verl_cua.testing import fake_docker  # noqa: E402
from verl_cua.testing.fake_docker import BOOT_S, RUN_S, FakeDockerClient  # noqa: E402

DESKTOPS = 32
LIST_S = 0.002  # docker inspects each listed container: a scan of 32 containers ~0.06 s
FAST = {"docker_lock_timeout": 30.0, "docker_start_interval": 0.0}
USED = fake_docker.USED_TASK  # its setup marks the desktop used: the next reset restarts it


@pytest.fixture
def client(tmp_path, monkeypatch):
    """The fake engine, its scans counted (`client.scans`): desktop-env's `_get_used_ports`, ours' and upstream's."""
    fake = fake_docker.install(monkeypatch, tmp_path, FakeDockerClient(list_s=LIST_S))
    fake.scans = 0
    scan = docker_provider.DockerProvider._get_used_ports

    def counted(self):
        fake.scans += 1
        return scan(self)

    monkeypatch.setattr(docker_provider.DockerProvider, "_get_used_ports", counted)
    yield fake
    for container in list(fake.existing):  # a failing test leaves no servers behind
        container.remove(force=True)


def _env(**options):
    return make_env("osworld", provider="docker", path_to_vm="Ubuntu.qcow2", pause=0, screen=(64, 40),
                    **{**FAST, **options})  # fmt: skip


def _ports(env) -> dict[int, int]:
    return dict(env.docker.ports)


def test_ports_are_chosen_once_per_desktop_and_kept_across_its_resets_at_32_with_a_fake_docker_client(client):
    pool = EnvPool(lambda: _env(docker_boot_batch=0), DESKTOPS, start_timeout=60.0, start_retries=0)
    try:
        pool.warm()
        assert pool.stats()["alive"] == DESKTOPS
        assert client.scans == DESKTOPS  # one scan per first start, for its four ports
        envs = [slot.env for slot in pool._slots]
        first = {env.docker.env_id: _ports(env) for env in envs}
        assert len({p for ports in first.values() for p in ports.values()}) == 4 * DESKTOPS
        holds = [env.docker.starts[0].lock_hold for env in envs]
        for _ in range(2):  # used desktops: every reset stops its container and runs a new one, all at once
            assert not any(pool.map(lambda lease, task: (lease.reset(task), lease.infra_failure)[1],
                                    [USED] * DESKTOPS))  # fmt: skip
        assert len(client.runs) == 2 * DESKTOPS and client.scans == DESKTOPS  # no scan at any reset
        assert {env.docker.env_id: _ports(env) for env in envs} == first
        assert all(c.kwargs["ports"] == first[c.labels["verl-cua.env"]] for c in client.runs)
        resets = [t for env in envs for t in env.docker.starts[1:]]
        assert len(resets) == DESKTOPS and all(t.port_scans == 0 and t.lock_hold == 0 for t in resets)  # no host lock
        # the lock hold, timed at 32 first starts: a run and one scan, far inside the lock wait
        assert max(holds) < RUN_S + 2 + 30 * LIST_S * DESKTOPS
        assert pool.stats()["infra_failures"] == 0
    finally:
        pool.close()
    assert client.existing == []


def test_desktop_envs_own_start_scans_four_times_under_its_lock_with_a_fake_docker_client(client):
    """The negative control: upstream's provider scans the host once per port at every start, a reset's too, and
    holds its lock for them; ours holds it for one scan."""
    for _ in range(DESKTOPS - 1):  # a busy host: 31 containers for the scans to list
        client.add({"com.example.app": "db"})
    upstream = docker_provider.DockerProvider(None)
    upstream.start_emulator("Ubuntu.qcow2", True, "Ubuntu")
    upstream.revert_to_snapshot("Ubuntu.qcow2", "init")
    scanned = client.scans
    started = time.monotonic()
    upstream.start_emulator("Ubuntu.qcow2", True, "Ubuntu")
    upstream_start = time.monotonic() - started
    assert scanned == 4 and client.scans == 8
    env = _env()
    try:
        ours = env.docker.starts[0]
        assert client.scans == 9 and ours.port_scans == 1
        scan_s = LIST_S * DESKTOPS
        assert ours.lock_hold < 3 * scan_s + RUN_S < upstream_start  # upstream: four scans and the run, then boot
    finally:
        env.close()
        upstream.stop_emulator("Ubuntu.qcow2")


def test_a_kept_port_taken_between_resets_is_chosen_anew_with_a_fake_docker_client(client):
    env = _env()
    squatter = None
    try:
        env.reset(USED)
        kept = _ports(env)
        stop = env.docker.stop_emulator

        def stop_then_taken(*args, **kwargs):  # another program binds the server port while the VM is down
            nonlocal squatter
            stop(*args, **kwargs)
            squatter = socket.socket()
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the VM's polls left TIME_WAITs
            squatter.bind(("127.0.0.1", kept[5000]))
            squatter.listen()

        env.docker.stop_emulator = stop_then_taken
        env.reset(USED)
        assert env.healthy() and _ports(env)[5000] != kept[5000] and env.docker.starts[-1].port_scans == 1
        env.docker.stop_emulator = stop
        moved = _ports(env)
        client.refuse_ports = {moved[8080]}  # docker finds a kept port taken: another process's container won it
        env.reset(USED)
        assert env.healthy() and env.docker.starts[-1].port_scans == 1
        assert _ports(env)[8080] != moved[8080]
    finally:
        env.close()
        if squatter is not None:
            squatter.close()
    assert [c.labels for c in client.existing] == [{"com.example.app": "raced"}]  # the other process's


@pytest.mark.parametrize("batch", [4, 0], ids=["batch-4", "unbounded"])
def test_docker_boot_batch_bounds_boots_at_once_host_wide_at_32_with_a_fake_docker_client(client, batch):
    client.boot_s = 0.6
    pool = EnvPool(lambda: _env(docker_boot_batch=batch), DESKTOPS, start_timeout=60.0, start_retries=0)
    try:
        pool.warm()
        assert pool.stats()["alive"] == DESKTOPS
        if batch:
            assert client.max_booting <= batch
            assert sum(slot.env.docker.starts[0].slot_wait > 0.3 for slot in pool._slots) >= DESKTOPS // 2
        else:  # the negative control: without the bound, the boots overlap well past 4
            assert client.max_booting > 4
    finally:
        pool.close()
    assert client.existing == []


def test_docker_boot_timeout_is_the_readiness_wait_with_a_fake_docker_client(client):
    client.boot_s = 5.0
    started = time.monotonic()
    with pytest.raises(InfraFailure, match=r"within 0.5 s \(docker_boot_timeout; `verl-cua probe-boots`"):
        _env(docker_boot_timeout=0.5)
    assert time.monotonic() - started < 4.0  # not desktop-env's 300 s, nor the VM's 5 s
    assert len(client.runs) == 1 and client.existing == []
    with pytest.raises(ValueError, match="docker_boot_timeout must be > 0 seconds"):
        _env(docker_boot_timeout=0)
    with pytest.raises(ValueError, match="docker_boot_batch must be a whole number"):
        _env(docker_boot_batch=2.5)


def test_the_pools_start_bound_counts_the_boot_batches_before_a_start():
    options = docker_fleet.pop_options({"docker_boot_batch": 8, "docker_boot_timeout": 200})
    unbounded = docker_fleet.pop_options({"docker_boot_batch": 0, "docker_boot_timeout": 200})
    assert docker_fleet.start_timeout(32, options) - docker_fleet.start_timeout(32, unbounded) == 3 * 200
    assert docker_fleet.start_timeout(8, options) == docker_fleet.start_timeout(8, unbounded)
    assert docker_fleet.start_timeout(9, options) - docker_fleet.start_timeout(9, unbounded) == 200


def test_probe_boots_32_reports_percentiles_lock_holds_and_settings_with_a_fake_docker_client(client, capsys):
    client.boot_s = lambda booting: BOOT_S + 0.02 * booting  # a host that slows as more VMs boot
    report = boot_probe.probe_boots(DESKTOPS, "Ubuntu.qcow2", {**FAST, "docker_boot_batch": 0}, say=lambda s: None)
    wave, quiet = report["wave"], report["quiet"]
    assert wave["failed"] == 0 and quiet["failed"] == 0 and len(client.runs) == DESKTOPS + 1
    assert BOOT_S <= quiet["boot"]["max"] < wave["boot"]["p90"] <= wave["boot"]["max"]
    assert wave["boot"]["p50"] <= wave["boot"]["p90"] and wave["lock_hold"]["max"] >= RUN_S
    assert wave["port_scans"] == DESKTOPS and wave["lock_wait"]["max"] > 0
    assert report["suggested"] == {"docker_boot_batch": DESKTOPS, "docker_boot_timeout": 300}
    assert client.existing == []  # every container it ran removed
    printed = boot_probe.lines(report)
    assert any(line.startswith(f"{DESKTOPS} at once: boot: p50 ") for line in printed)
    settings = f"+cua.env.kwargs.docker_boot_batch={DESKTOPS} +cua.env.kwargs.docker_boot_timeout=300"
    assert printed[-1] == f"suggested: {settings}"


def test_the_suggested_batch_keeps_an_interpolated_boot_within_half_the_timeout():
    assert boot_probe.suggest(60, 120, 32, 300) == {"docker_boot_batch": 32, "docker_boot_timeout": 300}
    assert boot_probe.suggest(60, 150, 32, 300)["docker_boot_batch"] == 32  # exactly half: fits
    # p90 grows 10 s per extra boot at once: 10 at once boot in 60 + 9 x 10 = 150 s, half of 300
    assert boot_probe.suggest(60, 370, 32, 300) == {"docker_boot_batch": 10, "docker_boot_timeout": 300}
    assert boot_probe.suggest(200, 400, 32, 300) == {"docker_boot_batch": 1, "docker_boot_timeout": 400}
    assert boot_probe.suggest(60, 60, 1, 300) == {"docker_boot_batch": 1, "docker_boot_timeout": 300}


def test_probe_boots_stopped_with_ctrl_c_says_so_in_one_line_and_leaves_no_container(client, capsys, monkeypatch):
    client.boot_s = 30.0  # the VMs never come up while the probe runs
    monkeypatch.setattr(boot_probe, "CLOSE_GRACE", 5.0)
    threading.Timer(1.0, _thread.interrupt_main).start()  # Ctrl-C while 4 desktops boot
    args = boot_probe.build_parser().parse_args(["--desktops", "4", "--vm-path", "Ubuntu.qcow2", "--no-quiet"])
    assert boot_probe.run(args) == 130
    err = capsys.readouterr().err.strip()
    assert err == "verl-cua probe-boots: stopped; every container it ran was removed, no figure kept"
    assert len(client.runs) >= 1 and client.existing == []


def test_probe_boots_bad_input_is_one_line(tmp_path, monkeypatch, capsys):
    def no_engine(*args, **kwargs):
        raise docker_provider.docker.errors.DockerException("Error while fetching server API version")

    monkeypatch.setattr(docker_provider.docker, "from_env", no_engine)
    parse = boot_probe.build_parser().parse_args
    assert boot_probe.run(parse(["--vm-path", str(tmp_path / "missing.qcow2")])) == 2
    assert capsys.readouterr().err.strip().endswith("missing.qcow2 (--vm-path: the recipe's VM_PATH)")
    (tmp_path / "Ubuntu.qcow2").write_bytes(b"QFI\xfb")
    assert boot_probe.run(parse(["--vm-path", str(tmp_path / "Ubuntu.qcow2"), "--desktops", "0"])) == 2
    assert capsys.readouterr().err.strip() == "verl-cua probe-boots: --desktops must be at least 1, got 0"
    assert boot_probe.run(parse(["--vm-path", str(tmp_path / "Ubuntu.qcow2"), "--no-quiet"])) == 2
    err = capsys.readouterr().err.strip()
    assert err == "verl-cua probe-boots: the Docker engine did not answer: Error while fetching server API version"


def test_resets_take_no_host_lock_while_someone_holds_it_with_a_fake_docker_client(client, tmp_path):
    """Resets of desktops with kept ports finish while another process holds desktop-env's lock; a first start
    (which chooses ports) waits for it: the negative control."""
    short = {"docker_lock_timeout": 0.3, "docker_lock_retries": 0}  # desktop-env's wait, process-wide: kept short
    envs = [_env(**short) for _ in range(4)]
    try:
        for env in envs:
            env.reset(USED)
        holder, release = _hold(tmp_path / "docker_port_allocation.lck")
        started = time.monotonic()
        for env in envs:
            env.reset(USED)  # used: stop, and a new container on the kept ports
        assert time.monotonic() - started < 5 and all(env.healthy() for env in envs)
        with pytest.raises(InfraFailure, match=r"stayed busy \(1 x 0.3 s waited\)"):
            _env(**short)
        release.set()
        holder.join()
    finally:
        for env in envs:
            env.close()


def _hold(path) -> tuple[threading.Thread, threading.Event]:
    """Another process's hold of `path` (filelock's locks are per thread), until the event is set."""
    import filelock

    taken, release = threading.Event(), threading.Event()

    def hold():
        with filelock.FileLock(str(path)):
            taken.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    taken.wait(5)
    return holder, release


def test_a_first_start_leaves_out_the_ports_a_desktop_keeps_while_its_vm_is_down_with_a_fake_docker_client(client):
    first = _env()
    try:
        kept = _ports(first)
        first.docker.stop_emulator("Ubuntu.qcow2")  # a reset's stop: the ports are free on the host, still kept
        second = _env()
        try:
            assert not set(_ports(second).values()) & set(kept.values())
        finally:
            second.close()
    finally:
        first.close()
    third = _env()  # closed desktops keep nothing
    try:
        assert set(_ports(third).values()) & set(kept.values())
    finally:
        third.close()


def test_a_first_start_whose_port_docker_refuses_chooses_again_with_a_fake_docker_client(client):
    client.refuse_ports = set(range(9222, 9422))  # whatever Chrome port the scan chooses, another process won it
    env = _env()
    try:
        assert env.healthy() and len(client.ours()) == 1 and env.docker.starts[0].port_scans == 2
        raced = [c for c in client.existing if c.labels == {"com.example.app": "raced"}]
        assert len(raced) == 1 and _ports(env)[9222] not in raced[0].kwargs["ports"].values()
    finally:
        env.close()


def test_a_desktop_closed_while_its_vm_boots_gives_its_boot_slot_back_at_once_with_a_fake_docker_client(
    client, monkeypatch
):
    monkeypatch.setattr(docker_fleet, "READY_SLICE", 0.2)
    client.boot_s = 30.0  # never up while the test runs
    provider = docker_fleet.LabelledDockerProvider(None, docker_fleet.pop_options({**FAST, "docker_boot_batch": 1}))
    failure = []
    start = threading.Thread(target=lambda: _catch(failure, provider.start_emulator, "Ubuntu.qcow2", True, "Ubuntu"))
    start.start()
    deadline = time.monotonic() + 10
    while client.booting == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    provider.close()
    start.join(3)
    assert not start.is_alive() and "closed while its VM booted" in failure[0]
    client.boot_s = BOOT_S
    env = _env(docker_boot_batch=1)  # the one slot is free again
    try:
        assert env.docker.starts[0].slot_wait < 1.0
    finally:
        env.close()
    assert client.existing == []


def _catch(into: list, call, *args) -> None:
    try:
        call(*args)
    except Exception as exc:
        into.append(str(exc))


def test_probe_boots_in_batches_interpolates_over_the_boots_that_ran_together(client, monkeypatch):
    """With --batch 4 only 4 boot at once: the slowdown per extra boot is the wave's over 3 more, not 31."""
    seen = []
    monkeypatch.setattr(boot_probe, "suggest", lambda quiet, p90, at_once, timeout: seen.append(at_once) or {})
    boot_probe.probe_boots(8, "Ubuntu.qcow2", {**FAST, "docker_boot_batch": 4}, quiet_first=False, say=lambda s: None)
    boot_probe.probe_boots(8, "Ubuntu.qcow2", {**FAST, "docker_boot_batch": 0}, quiet_first=False, say=lambda s: None)
    assert seen == [4, 8] and client.max_booting <= 8 and client.existing == []
