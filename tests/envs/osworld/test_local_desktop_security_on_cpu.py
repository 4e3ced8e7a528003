"""Attacks on the local desktop, run as hostile model output would run them (as the desktop's user, through its
server or typed into its xterm), each asserting containment: persistence across reset and close, reward
carry-over, the desktop outliving its owner, one desktop reaching another, exhausting the host, seeing the host,
reaching the host's services, the openings used by other local users, code planted in the infrastructure, and the
typing bug, and the opt-in egress (public addresses only). Network probes target only this machine's loopback and
its own interface addresses."""

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
import requests

from verl_cua.envs import make_env
from verl_cua.envs.osworld import egress, sandbox
from verl_cua.envs.osworld.local_desktop import RUNTIME_ROOT, LocalDesktop
from verl_cua.testing.desktops import running, wait_for

REPO_ROOT = Path(__file__).resolve().parents[3]  # the checkout under test

MiB = 1 << 20
SMALL = sandbox.Limits(pids=200, memory=384 * MiB, home=48 * MiB, tmp=32 * MiB, shm=16 * MiB, var_tmp=16 * MiB,
                       max_file=4 * MiB)  # fmt: skip
DONE = {  # a task whose success is a folder: what a persistent process could recreate for the next episode
    "id": "security-mkdir",
    "instruction": "Create the folder ~/Documents/done.",
    "config": [
        {"type": "launch", "parameters": {"command": ["xterm", "-geometry", "100x20+10+10"]}},
        {"type": "sleep", "parameters": {"seconds": 1.0}},
    ],  # fmt: skip
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "test -d ~/Documents/done && echo ok", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "ok\n"}},
    },
}


@pytest.fixture(scope="module")
def pair(local_desktop):
    a, b = LocalDesktop(screen=(640, 480)), LocalDesktop(screen=(640, 480))
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture(scope="module")
def small(local_desktop):
    d = LocalDesktop(screen=(640, 480), limits=SMALL)
    d.start()
    yield d
    d.stop()


def _sh(desktop: LocalDesktop, script: str, timeout: float = 20) -> dict:
    """Run a bash script in the desktop as its user (what typed model output can do)."""
    response = desktop.request("POST", "/run_bash_script", json={"script": script, "timeout": timeout}, timeout=90)
    return response.json()


PERSIST = (  # three ways to outlive the episode: a detached session, a new user namespace, a D-Bus-activated service
    "setsid sh -c 'while :; do mkdir -p ~/Documents/done; sleep 0.1; done' >/dev/null 2>&1 & "
    "unshare -Ur sh -c 'while :; do mkdir -p ~/Documents/done; sleep 0.1; done' >/dev/null 2>&1 & "
    "dbus-send --session --dest=org.a11y.Bus --print-reply /org/a11y/bus org.a11y.Bus.GetAddress >/dev/null; "
    "dbus-update-activation-environment LD_PRELOAD=/dev/shm/evil.so 2>/dev/null; echo planted\n"
)


# -- persistence across reset, reward carry-over ------------------------------------------------------------------
def test_a_persistence_attempt_survives_no_reset_and_the_next_episode_scores_zero(local_desktop):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.2, screen=(800, 600))
    try:
        env.reset(DONE)
        result = env.step(f"pyautogui.click(200, 150); pyautogui.typewrite({PERSIST!r})")
        assert result.info["action_valid"] and not result.info["infra_failure"]
        local = env.local
        assert wait_for(lambda: "done" in _sh(local, "ls ~/Documents")["output"])
        assert wait_for(lambda: "at-spi-bus-laun" in _sh(local, "ps -eo comm")["output"])  # activated by D-Bus
        bus = _sh(local, "echo $DBUS_SESSION_BUS_ADDRESS")["output"]
        assert env.evaluate() == 1.0  # the attack works within its own episode
        env.reset(DONE)  # the next episode: nothing of the last one may run or remain
        time.sleep(1.0)  # a survivor would have recreated the folder by now
        assert env.evaluate() == 0.0
        # the host's view (the agent sees only its own dumpable processes: /proc has hidepid)
        left = [psutil.Process(pid).name() for pid in local.pids()[2:]]  # past the keeper and bubblewrap
        allowed = {"bwrap", "python", "python3", "Xvfb", "openbox", "dbus-daemon", "xterm", "bash", "ps", "sh"}
        assert set(left) <= allowed, left
        assert left.count("dbus-daemon") == 1  # a fresh session bus: no activation environment carried over
        assert _sh(local, "echo $DBUS_SESSION_BUS_ADDRESS")["output"] != bus
    finally:
        env.close()


def test_nothing_written_anywhere_writable_survives_a_reset(pair):
    d, _ = pair
    places = ["~/Documents/x", "~/.config/x", "/tmp/x", "/tmp/.X11-unix/x", "/tmp/.ICE-unix/x", "/tmp/.X999-lock",
              "$XDG_RUNTIME_DIR/x", "/var/tmp/x", "/dev/shm/x", "/run/lock/x"]  # fmt: skip
    script = "mkdir -p /tmp/.ICE-unix; " + "".join(f"echo carry > {p} && echo WROTE {p}; " for p in places)
    assert _sh(d, script)["output"].count("WROTE") == len(places)
    d.revert()
    listing = _sh(d, "".join(f"ls {p} 2>/dev/null; " for p in places) + "grep -rl carry ~ /tmp /var/tmp /dev/shm "
                  "/run/lock $XDG_RUNTIME_DIR 2>/dev/null; echo END")  # fmt: skip
    assert listing["output"] == "END\n", listing
    template = sorted(str(p.relative_to(d.runtime / "pub" / "home_template")) for p in
                      (d.runtime / "pub" / "home_template").rglob("*"))  # fmt: skip
    home = _sh(d, "cd ~ && find . -mindepth 1 -path ./.cache -prune -o -print | cut -c3-")["output"].split()
    assert sorted(home) == [p for p in template if not p.startswith(".cache")]  # (openbox writes its cache at start)


# -- the desktop never outlives close() or its owner, whatever the agent did to its server --------------------------
@pytest.mark.parametrize("server", ["killed", "frozen"])
def test_close_kills_everything_after_its_launcher_and_server_were_killed_or_frozen(local_desktop, server):
    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        _sh(d, "unshare -Ur sleep 1021 >/dev/null 2>&1 & setsid sleep 1022 >/dev/null 2>&1 & echo")
        pids = d.pids()
        assert len(pids) >= 7
        signal_name = "KILL" if server == "killed" else "STOP"
        infra = d.request("GET", "/_verl_cua/health").json()["infra"]
        launcher_pid, server_pid = d.host_pid(infra["launcher"]), d.host_pid(infra["server"])
        try:  # the agent's side: its launcher is the parent of what a setup launch runs
            attack = {"command": f"kill -{signal_name} $PPID", "shell": True}
            d.request("POST", "/setup/launch", json=attack, timeout=10)
        except requests.RequestException:
            pass
        assert wait_for(lambda: _dead_or_stopped(launcher_pid))
        # the server runs as a uid the agent's processes cannot signal (test_the_agent_cannot_see_signal_trace_...):
        # the host stands in for a server that died or hung by itself
        os.kill(server_pid, signal.SIGKILL if server == "killed" else signal.SIGSTOP)
        assert wait_for(lambda: _dead_or_stopped(server_pid))
    finally:
        d.stop()
    assert wait_for(lambda: running(pids) == [])


def _dead_or_stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_STOPPED)
    except psutil.NoSuchProcess:
        return True


OWNER = """
import json, os, sys, time
from verl_cua.envs.osworld.local_desktop import LocalDesktop
d = LocalDesktop(screen=(640, 480))
d.start()
d.request("POST", "/run_bash_script", json={"script": "unshare -Ur sleep 1031 >/dev/null 2>&1 & echo", "timeout": 5})
try:  # the agent's launcher frozen by the agent; the shell may freeze it before it answers
    d.request("POST", "/setup/launch", json={"command": "kill -STOP $PPID", "shell": True}, timeout=10)
except Exception:
    pass
os.kill(d.host_pid(d.request("GET", "/_verl_cua/health").json()["pid"]), 19)  # and the server (SIGSTOP, by the host)
print(json.dumps({"pids": d.pids(), "cgroups": [str(p) for p in d.cgroups]}), flush=True)
time.sleep(600)
"""


def test_a_desktop_whose_server_is_frozen_still_dies_with_its_owner(local_desktop):
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        desktop = json.loads(owner.stdout.readline())
        assert len(running(desktop["pids"])) >= 6
    finally:
        owner.kill()  # SIGKILL: no cleanup runs in the owner
        owner.wait()
    assert wait_for(lambda: running(desktop["pids"]) == [], timeout=20)


# -- one desktop cannot reach another ----------------------------------------------------------------------------
def test_a_desktop_cannot_read_display_signal_or_connect_to_another(pair):
    a, b = pair
    _sh(b, "echo b-secret > ~/Documents/secret.txt")
    if os.geteuid() == 0:
        assert a.identity.uid != b.identity.uid  # a uid of its own per desktop
    b_pids = " ".join(str(p) for p in b.pids())
    probes = (
        f"ls -d {b.runtime} {b.runtime}/pub/Xauthority /proc/{b.init.pid}/root 2>&1; "  # B's files, by any path
        "grep -rl b-secret /home /tmp /run /var /dev/shm 2>/dev/null; "
        f"DISPLAY=:{b.display} xdpyinfo >/dev/null 2>&1 && echo DISPLAYED; "  # B's X server
        f"for p in {b_pids}; do kill -0 $p 2>/dev/null && echo SIGNALLED $p; done; "  # B's processes, by host pid
        f'for port in {b.port} {b.cdp_port}; do timeout 3 bash -c "exec 3<>/dev/tcp/{b.host}/$port" 2>/dev/null '
        "&& echo CONNECTED $port; done; echo END"
    )
    out = _sh(a, probes, timeout=60)["output"]
    assert "b-secret" not in out and "DISPLAYED" not in out and "SIGNALLED" not in out and "CONNECTED" not in out
    assert out.count("No such file or directory") == 3 and out.endswith("END\n"), out
    assert _sh(b, "cat ~/Documents/secret.txt")["output"] == "b-secret\n" and b.healthy()


def _host_bytes(folder) -> int:
    """Bytes of disk the files under `folder` take on the host (the desktop's runtime: what its tmpfs mounts are not;
    the filesystem's own usage would count the suite's other worker's writes too)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


# -- limits: what the agent consumes is bounded; reaching a bound fails the agent's command -------------------------
def test_writing_past_the_home_and_shm_sizes_fails_in_the_desktop_not_on_the_host(small):
    disk = _host_bytes(small.runtime)
    out = _sh(small, "head -c 200M /dev/zero > ~/big; echo rc=$?; head -c 100M /dev/zero > /dev/shm/big; echo rc=$?; "
              "du -sm ~/big /dev/shm/big | cut -f1", timeout=60)  # fmt: skip
    assert out["output"].split()[:2] == ["rc=1", "rc=1"] and out["error"].count("No space left on device") == 2, out
    home_mb, shm_mb = (int(v) for v in out["output"].split()[2:])
    assert home_mb <= SMALL.home // MiB and shm_mb <= SMALL.shm // MiB
    assert _host_bytes(small.runtime) - disk < 32 * MiB  # nothing landed in the desktop's folder on the host's disk
    small.revert()


def test_a_fork_bomb_stops_at_the_pids_limit_and_the_desktop_recovers_on_reset(small):
    bomb = (
        "import subprocess\nkids = []\ntry:\n    while len(kids) < 600:\n"
        "        kids.append(subprocess.Popen(['sleep', '1041']))\nexcept OSError as e:\n    print(len(kids), e.errno)"
    )
    out = _sh(small, f'python3 -c "{bomb}"', timeout=60)
    started, errno = (int(v) for v in out["output"].split())
    assert 50 < started < SMALL.pids and errno == 11, out  # EAGAIN: the limit, long before 600
    assert len(small.pids()) <= SMALL.pids
    if small.cgroups:
        assert small.usage()["pids"] <= SMALL.pids
    small.revert()
    assert _sh(small, "pgrep -c -x sleep")["output"].split() == ["0"] and small.healthy()


def test_a_memory_hog_is_killed_inside_its_desktop_and_the_host_keeps_its_memory(small):
    if not small.cgroups:
        pytest.skip("no cgroups (not root): the memory of a rootless desktop is not bounded")
    out = _sh(small, "python3 -c 'b = b\"x\" * (1 << 30); print(len(b))'; echo rc=$?", timeout=60)
    assert "rc=137" in out["output"] and "1073741824" not in out["output"], out  # OOM-killed in its cgroup
    assert small.usage()["memory"] <= SMALL.memory and small.healthy()


def test_an_evaluator_fetching_a_huge_sparse_file_stays_bounded(small):
    from desktop_env.controllers.python import PythonController

    _sh(small, "truncate -s 1500M ~/huge.xlsx; head -c 1000 /dev/urandom > ~/small.bin")
    controller = PythonController(vm_ip=small.host, server_port=small.port)
    rss = psutil.Process().memory_info().rss
    assert controller.get_file("~/huge.xlsx") is None  # OSWorld's getters then score 0: the agent's failure
    assert psutil.Process().memory_info().rss - rss < 64 * MiB
    assert len(controller.get_file("~/small.bin")) == 1000
    small.revert()


def test_closing_a_desktop_frees_its_memory_and_removes_its_cgroups(local_desktop):
    d = LocalDesktop(screen=(640, 480), limits=SMALL)
    d.start()
    cgroups, runtime = list(d.cgroups), d.runtime
    _sh(d, "head -c 12M /dev/urandom > /dev/shm/keep")
    if cgroups:
        assert d.usage()["memory"] >= 12 * MiB
    d.stop()
    assert not any(p.parent.exists() for p in cgroups) and not runtime.exists()


# -- what the desktop sees of the host --------------------------------------------------------------------------------
def test_the_desktop_sees_no_host_tree_process_abstract_socket_or_interface(pair):
    d, _ = pair
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.bind(f"\0verl-cua-probe-{os.getpid()}")  # a host service on an abstract unix socket
    probe.listen(1)
    try:
        hidden = [str(REPO_ROOT), str(Path.home()), "/root", "/work", str(RUNTIME_ROOT), "/var/log", "/srv", "/mnt"]
        script = (
            "".join(f"ls -d {p} 2>/dev/null && echo SEEN {p}; " for p in hidden)
            + f'grep -c verl-cua-probe /proc/net/unix; python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
            f"s.connect(b'\\\\0verl-cua-probe-{os.getpid()}')\" 2>/dev/null && echo CONNECTED; "
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; hostname; ls /proc | grep -c '^[0-9]'; "
            "cat /proc/1/cmdline | tr '\\0' ' ' | cut -c1-5"
        )
        out = _sh(d, script)["output"].split("\n")
    finally:
        probe.close()
    assert not any(line.startswith(("SEEN", "CONNECTED")) for line in out), out
    assert out[0] == "0" and out[1] == "lo" and out[2] == sandbox.HOSTNAME
    # its own processes only: the sandbox's init (pid 1) and the server's processes are not even listed
    assert int(out[3]) < 20 and out[4] == "" and "1" not in _sh(d, "ls /proc")["output"].split()


def test_host_services_are_out_of_the_desktops_reach(pair):
    d, _ = pair
    listeners = [socket.create_server(("0.0.0.0", 0)), socket.create_server(("::1", 0), family=socket.AF_INET6)]
    port4, port6 = (s.getsockname()[1] for s in listeners)
    hosts = ["127.0.0.1", "127.0.0.2", d.host]  # probes stay on loopback (the listener is on every address)
    try:
        script = (
            "".join(f"timeout 3 bash -c 'exec 3<>/dev/tcp/{h}/{port4}' 2>/dev/null && echo OPEN {h}; " for h in hosts)
            + f"timeout 3 bash -c 'exec 3<>/dev/tcp/::1/{port6}' 2>/dev/null && echo OPEN ::1; echo END"
        )
        assert _sh(d, script, timeout=90)["output"] == "END\n"
    finally:
        for s in listeners:
            s.close()


# -- the host's openings: this host user only, and the server needs the token --------------------------------------
def test_the_openings_refuse_other_local_users_and_the_server_refuses_requests_without_the_token(pair):
    if os.geteuid() != 0:
        pytest.skip("needs a second local user")
    d, _ = pair
    _sh(d, "chromium about:blank >/dev/null 2>&1 &")
    cdp = f"http://{d.host}:{d.cdp_port}/json/version"
    assert wait_for(lambda: _status(cdp) == 200, timeout=60)  # this user reaches Chromium through the opening
    assert _status(f"{d.url}/screenshot", token=False) == 401
    other = (
        "import socket, sys\n"
        "for port in sys.argv[2:]:\n"
        "    s = socket.create_connection((sys.argv[1], int(port)), timeout=5)\n"
        "    try:\n"
        "        s.sendall(b'GET /json/version HTTP/1.0\\r\\n\\r\\n')\n"
        "        print(port, len(s.recv(1000)))\n"
        "    except ConnectionResetError:\n"
        "        print(port, 0)\n"
    )
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", other]
    out = subprocess.run([*nobody, d.host, str(d.cdp_port), str(d.port)], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == [str(d.cdp_port), "0", str(d.port), "0"], out  # closed before a byte came back
    d.revert()


FAKE_SERVER = """
import os, socket
for path in ('/run/verl-cua-sock/server.sock', '/run/verl-cua-sock/cdp.sock'):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        print('BOUND', path)
    except OSError as e:
        print('REFUSED', path, e.errno)
"""


def test_the_servers_sockets_have_no_path_in_the_desktop_an_agent_could_take(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        out = d.request("POST", "/run_python", json={"code": FAKE_SERVER}, timeout=30).json()["output"]
        assert out.count("REFUSED") == 2 and "BOUND" not in out, out  # /run is not the agent's to write
        assert _sh(d, "ls -a /run; grep -c 'server.sock\\|cdp.sock' /proc/net/unix")["output"].split() == [
            ".",
            "..",
            "lock",
            "mount",
            "user",
            "verl-cua",
            "verl-cua-empty",
            "verl-cua-infra",
            "0",
        ]  # fmt: skip (mount: the root stage's utab, root's; verl-cua-empty: the overlays' empty layer)
        assert d.healthy()
        assert sorted(os.listdir(d.runtime / "sock")) == ["cdp.sock", "server.sock"]  # host side: only ours
    finally:
        d.stop()


def _status(url: str, token: bool = True) -> int:
    try:
        return requests.get(url, timeout=5, auth=None if token else ("", "")).status_code
    except requests.RequestException:
        return 0


# -- nothing of the infrastructure is writable or traceable by the agent --------------------------------------------
def test_the_agent_cannot_trace_or_write_the_infrastructure_or_its_runtime_files(pair):
    d, _ = pair
    health = d.request("GET", "/_verl_cua/health").json()["infra"]
    pids = " ".join(str(p) for p in health.values())  # the server, Xvfb, openbox, D-Bus and the launcher
    targets = ["/run/verl-cua/server/desktop_server.py", "/run/verl-cua/home_template/x", "/run/verl-cua-infra/Xvfb",
               "/run/verl-cua/bin/chromium", "/etc/passwd", "/usr/bin/x", "/opt/verl-cua/desktop-venv/x"]  # fmt: skip
    script = (
        f"for p in {pids}; do head -c1 /proc/$p/environ >/dev/null 2>&1 && echo READ $p; "
        f'python3 -c "import ctypes, sys; sys.exit(ctypes.CDLL(None).ptrace(16, $p, 0, 0) != -1)" || echo TRACED $p; '
        "done; "
        + "".join(f"echo x >> {t} 2>/dev/null && echo WROTE {t}; " for t in targets)
        + "cat /etc/shadow >/dev/null 2>&1 && echo SHADOW; echo END"
    )
    assert _sh(d, script, timeout=60)["output"] == "END\n"


# -- typing ----------------------------------------------------------------------------------------------------------
def test_every_printable_ascii_character_types_as_itself(pair):
    d, _ = pair
    text = "".join(c for c in string.printable if c not in "\t\n\r\x0b\x0c")
    d.request("POST", "/setup/launch", json={"command": "xterm -geometry 120x10+0+0 -e sh -c 'IFS= read -r l; "
              "printf %s \"$l\" > ~/typed.txt'", "shell": True}, timeout=10).raise_for_status()  # fmt: skip
    assert wait_for(lambda: "xterm" in _sh(d, "wmctrl -lx")["output"], timeout=20)
    time.sleep(0.5)
    code = f"import pyautogui; pyautogui.click(300, 60); pyautogui.typewrite({text!r}); pyautogui.press('enter')"
    d.request("POST", "/execute", json={"command": ["python3", "-c", code]}, timeout=60).raise_for_status()
    assert wait_for(lambda: _sh(d, "cat ~/typed.txt 2>/dev/null")["output"] != "", timeout=10)
    assert _sh(d, "cat ~/typed.txt")["output"] == text
    d.revert()


# -- without root ---------------------------------------------------------------------------------------------------
ROOTLESS = """
import json
from verl_cua.envs.osworld.local_desktop import LocalDesktop

d = LocalDesktop(screen=(640, 480))
d.start()
out = d.request("POST", "/run_bash_script", json={"script": "id -u; ls /proc | grep -c '^[0-9]'; "
                "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
                "cat /etc/shadow 2>&1 | cut -c1-60; touch /usr/x 2>&1 | cut -c1-60", "timeout": 10}).json()["output"]
pids = d.pids()
d.stop()
print(json.dumps({"out": out, "pids": pids}))
"""


def test_a_rootless_desktop_runs_contained(local_desktop):
    if os.geteuid() != 0:
        pytest.skip("the suite itself runs without root: every other test here is the rootless case")
    if sandbox.rootless_supported():
        pytest.skip(f"no rootless sandbox here: {sandbox.rootless_supported()}")
    tmp_path = Path(tempfile.mkdtemp(prefix="verl-cua-rootless-", dir="/var/tmp"))
    tmp_path.chmod(0o777)
    # Debian's python3 with this venv's packages (the venv's own interpreter may live under root's HOME)
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "VERL_CUA_DESKTOP_RUNTIME": str(tmp_path / "rt"),
           "PYTHONPATH": f"{REPO_ROOT}:{site}"}  # fmt: skip
    python = f"/usr/bin/python3.{sys.version_info.minor}" if sys.version_info[:2] == (3, 11) else sys.executable
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
                             ROOTLESS], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    uid, procs, net, shadow, usr = report["out"].strip().split("\n")
    assert uid == str(sandbox.ROOTLESS_UID) and int(procs) < 20 and net == "lo"
    assert "Permission denied" in shadow and "Read-only file system" in usr
    assert running(report["pids"]) == []
    shutil.rmtree(tmp_path, ignore_errors=True)


# -- opt-in egress: the web through the host's proxy, public addresses only -----------------------------------------
@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "192.0.2.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
    ],  # fmt: skip
)
def test_egress_refuses_every_non_public_address(address):
    assert not egress.public_only(ipaddress.ip_address(address), set(), [])


def test_egress_allows_public_addresses_but_never_this_hosts_own_or_its_networks():
    public = [ipaddress.ip_address(a) for a in ("8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8")]
    assert all(egress.public_only(ip, set(), []) for ip in public)
    assert not egress.public_only(ipaddress.ip_address("8.8.8.8"), {ipaddress.ip_address("8.8.8.8")}, [])
    assert not egress.public_only(ipaddress.ip_address("93.184.216.34"), set(), [ipaddress.ip_network("93.184.0.0/16")])
    own, nets = egress.host_networks()
    assert all(not egress.public_only(ip, own, nets) for ip in own)  # this machine's own addresses, as found


@pytest.fixture
def web_server():
    """An HTTP server on this host's loopback (what a desktop must not reach unless the test widens the policy)."""
    import http.server

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b"hello from the host"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_with_egress_on_the_hosts_loopback_services_stay_unreachable(local_desktop, web_server):
    # probes target loopback only; private, link-local and this host's interface addresses are refused by the same
    # policy, tested above without sending a packet
    d = LocalDesktop(screen=(640, 480), network="egress")
    d.start()
    try:
        hosts = ["127.0.0.1", "127.0.0.2", d.host]
        curl = "curl -s -o /dev/null --max-time 5"
        proxied = f"{curl} --noproxy '' -x $http_proxy"
        script = "".join(  # through the proxy (plain and CONNECT), then around it
            f"{proxied} -w '%{{http_code}} ' http://{h}:{web_server}/; "
            f"{proxied} -w '%{{http_connect}} ' -p http://{h}:{web_server}/; "
            f"{curl} -w '%{{http_code}}\\n' --noproxy '*' http://{h}:{web_server}/; "
            for h in hosts
        )
        lines = _sh(d, script, timeout=120)["output"].strip().split("\n")
        assert lines == ["403 403 000"] * len(hosts), lines  # refused by the proxy; no route around it
    finally:
        d.stop()


def test_egress_tunnels_plain_and_connect_requests_when_the_policy_allows_the_test_servers_address(
    local_desktop, web_server
):  # the tunnel's plumbing, with the policy widened to the test's own loopback server
    d = LocalDesktop(screen=(640, 480), network="egress")
    d.start()
    try:
        d._egress.allowed = lambda ip: str(ip) == "127.0.0.1"
        url = f"http://127.0.0.1:{web_server}/"
        curl = "curl -s --max-time 10 --noproxy '' -x $http_proxy"
        out = _sh(d, f"{curl} {url}; echo; {curl} -p {url}; echo", timeout=60)
        assert out["output"] == "hello from the host\n" * 2, out
    finally:
        d.stop()
