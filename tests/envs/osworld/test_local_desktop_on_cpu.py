"""The local OSWorld desktop on a real Xvfb/openbox/xterm: token, unix-socket server behind the host's loopback
openings, isolation from the project tree, revert (apps killed, HOME restored), a desktop killed by PID mid-episode
(infra failure, pool rebuild), and desktops that never outlive their owner."""

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from verl_cua.envs import EnvPool, make_env
from verl_cua.envs.osworld import local_desktop
from verl_cua.envs.osworld import local_desktop as local_desktop_module
from verl_cua.envs.osworld.local_desktop import DesktopStartError, LocalDesktop
from verl_cua.testing.desktops import running

REPO_ROOT = Path(__file__).resolve().parents[3]  # the checkout under test

TERM = {
    "id": "test-xterm",
    "instruction": "Use the terminal.",
    "config": [
        {"type": "launch", "parameters": {"command": ["xterm", "-geometry", "100x30+50+50"]}},
        {"type": "sleep", "parameters": {"seconds": 0.8}},
    ],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "cat ~/out.txt 2>/dev/null", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "ok\n"}},
    },
}


@pytest.fixture(scope="module")
def env(local_desktop):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.3)
    yield env
    env.close()


def _raw(url: str, headers: dict | None = None) -> int:
    """Status of a GET made without requests (so no netrc token is added)."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _bash(env, script: str) -> str:
    return env.desktop_env.controller.run_bash_script(script)["output"]


def test_server_refuses_requests_without_the_instance_token(env):
    url = env.local.url + "/screenshot"
    assert _raw(url) == 401
    assert _raw(url, {"Authorization": "Bearer " + "0" * 32}) == 401
    wrong = base64.b64encode(b"not-the-token:x").decode()
    assert _raw(url, {"Authorization": "Basic " + wrong}) == 401
    assert _raw(url, {"Authorization": "Bearer " + env.local.token}) == 200


def test_the_server_listens_on_a_unix_socket_and_the_host_opens_the_desktops_loopback_address_only(env):
    server = env.local.host_pid(env.local.request("GET", "/_verl_cua/health").json()["pid"])
    assert server is not None and "desktop_server" in " ".join(psutil.Process(server).cmdline())
    assert [c for c in psutil.Process(server).net_connections(kind="inet")] == []  # no TCP or UDP socket at all
    relays = {c.laddr for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    mine = {a for a in relays if a.port in (env.local.port, env.local.cdp_port)}
    assert {a.port for a in mine} == {env.local.port, env.local.cdp_port}
    assert {a.ip for a in mine} == {env.local.host} and env.local.host.startswith("127.77.")


def test_agent_cannot_read_or_write_the_project_tree(env):
    env.reset(TERM)
    probe = REPO_ROOT / "pyproject.toml"
    assert probe.is_file()
    typed = f"cat {probe} > ~/leak.txt 2> ~/err.txt; touch {REPO_ROOT}/pwned; echo done > ~/out.txt\n"
    result = env.step(f"pyautogui.click(300, 200); pyautogui.typewrite({typed!r})")
    assert result.info["action_valid"] and not result.info["infra_failure"]
    deadline = time.monotonic() + 10
    while "done" not in _bash(env, "cat ~/out.txt 2>/dev/null") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _bash(env, "cat ~/out.txt") == "done\n"  # the typed command line did run
    assert _bash(env, "wc -c < ~/leak.txt").strip() == "0"
    err = _bash(env, "cat ~/err.txt")  # the sandbox's filesystem is an allow-list: the project is not in it
    assert "No such file or directory" in err, err
    assert not (REPO_ROOT / "pwned").exists()
    if os.geteuid() == 0:
        assert _bash(env, "id -u").strip() != "0"  # the desktop runs as an unprivileged user
    assert _bash(env, "echo $HOME").strip() != os.path.expanduser("~")


def test_desktop_tmp_is_private_and_emptied_on_revert(env, tmp_path):
    env.reset(TERM)
    host_file = Path("/tmp") / f"verl-cua-host-{os.getpid()}"
    host_file.write_text("host secret")
    try:
        assert _bash(env, f"cat {host_file} 2>&1").startswith("cat: ")  # the host's /tmp is not the desktop's
        _bash(env, "echo mine > /tmp/desktop-file")
        assert not Path("/tmp/desktop-file").exists()
        assert _bash(env, "cat /tmp/desktop-file") == "mine\n"
        env.step("pyautogui.press('shift')")
        env.reset(TERM)
        assert _bash(env, "echo $DBUS_SESSION_BUS_ADDRESS").startswith("unix:path=/run/user/1000/bus")
        left = sorted(_bash(env, "ls -A /tmp").split())
        # the X server's, and the server's own XDG dirs (0700, made before any agent process)
        assert {".X11-unix"} <= set(left) <= {".X11-unix", f".X{env.local.display}-lock", ".verl-cua-machinery"}
    finally:
        host_file.unlink()


def test_revert_kills_apps_and_restores_home(env):
    env.reset(TERM)
    infra = set(env.local.request("GET", "/_verl_cua/health").json()["infra"].values())
    inside = [p.pid for p in local_desktop_module._namespace_processes(env.local.init)]
    apps = [psutil.Process(pid) for pid in inside if _ns_pid(pid) not in infra | {1}]
    assert any(p.name() == "xterm" for p in apps)
    _bash(env, "mkdir -p ~/junk && echo x > ~/junk/file")
    env.step("pyautogui.press('a')")  # marks the desktop used: the next reset reverts
    env.reset(TERM)
    for p in apps:
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    assert _bash(env, "ls ~/junk 2>&1; ls -A ~ | sort | tr '\\n' ' '").startswith("ls: cannot access")
    assert env.evaluate() == 0.0


def _ns_pid(pid: int) -> int:
    """A host pid's number inside its innermost PID namespace."""
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("NSpid:")).split()[-1])


def test_desktop_killed_mid_episode_is_an_infra_failure_and_the_pool_recovers(local_desktop):
    pool = EnvPool(lambda: make_env("osworld", provider="local", action_format="pyautogui", pause=0.2), size=1)
    try:
        with pool.acquire() as lease:
            lease.reset(TERM)
            first = lease.env
            for pid in reversed(first.pids()):  # the Xvfb, the server, the sandbox root: all by PID
                with contextlib.suppress(ProcessLookupError):  # a helper that ended, or died with the namespace
                    os.kill(pid, signal.SIGKILL)
            result = lease.step("pyautogui.click(10, 10)")
            assert result.info["infra_failure"] and result.done
            assert lease.evaluate() == 0.0 and lease.infra_failure
        start = time.monotonic()
        with pool.acquire() as lease:
            obs = lease.reset(TERM)
            assert lease.env is not first and not lease.infra_failure
            assert obs.screenshot.size == (1920, 1080)
        assert time.monotonic() - start < 30
        assert pool.stats()["restarts"] == 1 and pool.stats()["infra_failures"] >= 1
    finally:
        pool.close()


def test_missing_system_package_names_the_setup_command(monkeypatch):
    real = shutil.which
    monkeypatch.setattr(local_desktop.shutil, "which", lambda b: None if b == "Xvfb" else real(b))
    with pytest.raises(
        DesktopStartError,
        match=r"needs Xvfb: apt-get install -y --no-install-recommends xvfb \(or run verl-cua setup-desktop",
    ) as info:
        LocalDesktop()
    assert "\n" not in str(info.value)


def test_stop_leaves_no_process_and_no_runtime_dir(local_desktop):
    desktop = LocalDesktop(screen=(800, 600))
    desktop.start()
    pids, runtime = desktop.pids(), desktop.runtime
    assert len(pids) >= 4 and Path(runtime).is_dir()
    desktop.stop()
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not Path(runtime).exists()


def test_a_stopped_desktop_never_removes_the_token_of_the_desktop_that_reuses_its_address(local_desktop):
    # the scenario needs the new desktop on the old one's freed display (and so its loopback address). Once in CI,
    # under load, the new one came up one display higher (holder not identified): the precondition gets 3 tries
    for _attempt in range(3):
        old = LocalDesktop(screen=(800, 600))
        old.start()
        old.stop()
        new = LocalDesktop(screen=(800, 600))
        new.start()
        if new.host == old.host:
            break
        new.stop()
    try:
        assert new.host == old.host, "the freed display was taken three times over"
        old.stop()  # a second stop, as garbage collection of the old object would do
        del old
        from desktop_env.controllers.python import PythonController

        assert PythonController(vm_ip=new.host, server_port=new.port).get_vm_screen_size() == {
            "width": 800,
            "height": 600,
        }
    finally:
        new.stop()


OWNER = """
import json, time
from verl_cua.envs.osworld.local_desktop import LocalDesktop

desktop = LocalDesktop(screen=(800, 600))
desktop.start()
pids, same, deadline = desktop.pids(), 0, time.monotonic() + 30
while same < 5 and time.monotonic() < deadline:  # a settled desktop: its start-up helpers gone (on a busy machine, too)
    time.sleep(0.2)
    pids, last = desktop.pids(), pids
    same = same + 1 if pids == last else 0
print(json.dumps({"pids": pids, "root": desktop.proc.pid, "runtime": str(desktop.runtime)}), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("killed", ["owner", "owner_and_its_children"])  # the second is what Ray does to a worker
def test_a_desktop_never_outlives_its_owner_and_the_next_start_removes_what_it_left(local_desktop, killed):
    # a trainer or Ray worker killed with SIGKILL runs no cleanup; its desktops used to run on, orphaned, for good
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        orphan = json.loads(owner.stdout.readline())
        assert len(orphan["pids"]) >= 4 and Path(orphan["runtime"]).is_dir()
        mine = LocalDesktop(screen=(800, 600))
        mine.start()
        try:  # a start leaves the runtime of a desktop whose owner lives alone
            assert Path(orphan["runtime"]).is_dir() and len(running(orphan["pids"])) == len(orphan["pids"])
        finally:
            mine.stop()
    finally:
        owner.kill()
        owner.wait()
        if killed == "owner_and_its_children":  # the keeper too: bubblewrap dies with it (--die-with-parent)
            os.kill(orphan["root"], signal.SIGKILL)
    deadline = time.monotonic() + 20
    while running(orphan["pids"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running(orphan["pids"]) == []
    again = LocalDesktop(screen=(800, 600))
    again.start()
    try:
        assert not Path(orphan["runtime"]).exists() and Path(again.runtime).is_dir()
    finally:
        again.stop()
