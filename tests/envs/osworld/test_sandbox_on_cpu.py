"""The sandbox's pieces without a desktop: limits from the environment, bubblewrap's command line (an allow-list,
no capability left), the host relay (bytes both ways, half-closes, peers of another uid refused)."""

import errno
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from verl_cua.envs.osworld import sandbox
from verl_cua.envs.osworld.host_relay import UnixRelay, peer_uid


def test_limits_read_sizes_from_the_environment_and_reject_nonsense_in_one_line(monkeypatch):
    monkeypatch.setenv("VERL_CUA_DESKTOP_MEMORY", "8G")
    monkeypatch.setenv("VERL_CUA_DESKTOP_PIDS", "512")
    monkeypatch.setenv("VERL_CUA_DESKTOP_SHM", "64MiB")
    limits = sandbox.Limits.from_env()
    assert (limits.memory, limits.pids, limits.shm) == (8 << 30, 512, 64 << 20)
    assert limits.home == sandbox.Limits().home
    monkeypatch.setenv("VERL_CUA_DESKTOP_TMP", "lots")
    with pytest.raises(ValueError, match=r"^VERL_CUA_DESKTOP_TMP='lots': expected a positive size such as 4G") as info:
        sandbox.Limits.from_env()
    assert "\n" not in str(info.value)


def _argv(rootless: bool, tmp_path: Path, proxy: Path | None = None) -> list[str]:
    ident = (
        sandbox.Identity(1000, 1000, rootless=True) if rootless
        else sandbox.Identity(1900000100, 1900000100, False, machinery=1901048676)
    )  # fmt: skip
    limits = sandbox.Limits(pids=300, tmp=5 << 20)
    venv = "/opt/verl-cua/desktop-venv"
    return sandbox.bwrap_argv(ident=ident, runtime=tmp_path, infra=tmp_path / "infra", venv=venv, limits=limits,
                              info_fd=9, server=["server"], launcher=["launcher"], pair=(11, 12), seccomp_fd=13,
                              proxy_socket=proxy)  # fmt: skip


@pytest.mark.parametrize("rootless", [False, True])
def test_bubblewrap_gets_every_namespace_an_allow_list_and_the_limits(rootless, tmp_path):
    argv = _argv(rootless, tmp_path)
    for flag in ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent"):
        assert flag in argv
    assert ("--unshare-user" in argv) == rootless
    binds = [argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind", "--ro-bind-try")]
    assert all(b.startswith(("/usr", "/etc", "/var/lib/dbus", "/var/cache/fontconfig", "/opt/verl-cua", str(tmp_path)))
               for b in binds), binds  # fmt: skip
    assert "--bind" not in argv  # no host dir is writable inside: the server's sockets come in as fds
    proxy = tmp_path / "sock" / "proxy.sock"
    egress = _argv(rootless, tmp_path, proxy)
    assert "--bind" not in egress and egress[egress.index(str(proxy)) - 1] == "--ro-bind"  # connecting needs no write
    tmpfs = {argv[i + 1]: argv[i - 1] for i, a in enumerate(argv) if a == "--tmpfs" and argv[i - 2] == "--size"}
    assert tmpfs["/tmp"] == str(5 << 20) and set(tmpfs) >= {"/tmp", "/dev/shm", "/var/tmp", "/home", "/run/lock"}
    assert argv[argv.index("--seccomp") + 1] == "13"  # the keyring filter, for every process inside
    command = argv[argv.index("--") + 1 :]
    assert command[:2] == ["/bin/bash", "-c"] and len(command) == 3
    stage = command[2].splitlines()
    launcher, server = stage[-2], stage[-1]
    for line in (launcher, server):
        assert "prlimit --nproc=300:300 --" in line
    assert launcher.endswith("launcher 12<&- &") and server.endswith("server --launcher-pid $! 11<&-")
    if not rootless:  # bubblewrap runs as root: two uids, no capability but the server's reading, no new privileges
        assert "--reuid=1900000100" in launcher and "--bounding-set=-all " in launcher and "--no-new-privs" in launcher
        assert "--reuid=1901048676" in server and "--ambient-caps=-all,+dac_read_search" in server
        assert stage[0].startswith("mount -o remount,hidepid=invisible,gid=1901048676 /proc")
        assert any("lowerdir=/usr:" in line for line in stage) and any("lowerdir=/run/verl-cua/etc:/etc" in line
                                                                       for line in stage)  # fmt: skip
    else:
        assert "setpriv" not in command[2] and "mount" not in command[2]


def test_the_keeper_joins_its_cgroups_then_waits_on_the_owners_pipe(tmp_path):
    procs = [tmp_path / "a.procs", tmp_path / "b.procs"]
    keeper = subprocess.Popen(sandbox.keeper_argv(procs, ["sleep", "300"]), stdin=subprocess.PIPE)
    try:
        assert _wait(lambda: all(p.exists() and p.read_text().strip() == str(keeper.pid) for p in procs))
        sleeper = _wait_child(keeper.pid)
        assert keeper.poll() is None
        keeper.stdin.close()  # the owner is gone
        assert keeper.wait(timeout=10) == 0
    finally:
        keeper.kill()
    os.kill(sleeper, 9)  # (bubblewrap would have died with it through --die-with-parent; sleep does not)


def test_the_keeper_passes_the_handed_fds_on_and_holds_none_of_them(tmp_path):
    read, write = os.pipe()
    keeper = subprocess.Popen(sandbox.keeper_argv([], ["sleep", "300"], (read,)), stdin=subprocess.PIPE,
                              pass_fds=(read,))  # fmt: skip
    try:
        sleeper = _wait_child(keeper.pid)
        assert _wait(lambda: os.readlink(f"/proc/{keeper.pid}/exe").endswith("cat"))
        assert str(read) in os.listdir(f"/proc/{sleeper}/fd") and str(read) not in os.listdir(f"/proc/{keeper.pid}/fd")
    finally:
        keeper.kill()
        os.close(read)
        os.close(write)
    os.kill(sleeper, 9)


def test_a_keeper_that_cannot_join_its_cgroup_stops_with_its_status(tmp_path):
    keeper = subprocess.Popen(sandbox.keeper_argv([tmp_path / "missing" / "cgroup.procs"], ["sleep", "300"]),
                              stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert keeper.wait(timeout=10) == sandbox.CGROUP_FAILED


def _wait(predicate, timeout: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _wait_child(pid: int) -> int:
    import psutil

    assert _wait(lambda: psutil.Process(pid).children())
    return psutil.Process(pid).children()[0].pid


@pytest.fixture
def echo_socket(tmp_path):
    """A unix-socket server that answers each connection with what it read, after the client's half-close."""
    path = str(tmp_path / "echo.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(8)

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                conn.sendall(b"echo:" + data)

    threading.Thread(target=serve, daemon=True).start()
    yield path
    server.close()


def test_the_relay_pipes_both_ways_and_forwards_half_closes(echo_socket):
    relay = UnixRelay("127.0.0.1", echo_socket)
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as conn:
            payload = os.urandom(300_000)
            conn.sendall(payload)
            conn.shutdown(socket.SHUT_WR)
            got = b""
            while chunk := conn.recv(65536):
                got += chunk
        assert got == b"echo:" + payload
    finally:
        relay.close()


def test_peer_uid_names_the_owner_of_the_connecting_socket():
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname(), timeout=5):
            conn, _ = server.accept()
            with conn:
                assert peer_uid(conn) == os.geteuid()


def test_the_relay_refuses_a_peer_of_another_uid(echo_socket):
    relay = UnixRelay("127.0.0.1", echo_socket, allowed_uids={os.geteuid() + 12345})  # nobody we are
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as conn:
            try:
                conn.sendall(b"hello")
                conn.shutdown(socket.SHUT_WR)
                echoed = conn.recv(100)
            except OSError as exc:  # the refusal may close it before the send or the shutdown; a timeout still fails
                if exc.errno not in (errno.EPIPE, errno.ENOTCONN, errno.ECONNRESET):
                    raise
                echoed = b""
            assert echoed == b""  # closed, nothing came back from the socket's echo server
    finally:
        relay.close()
