"""The local desktop's mechanics under hostile agent code: token only in the server's memory, revert that leaves no
process and no read-only leftovers, health that needs Xvfb, openbox and D-Bus, stop that survives a frozen server,
locking, server deadlines, proxy and netrc hygiene (the attack classes themselves: test_local_desktop_security)."""

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import psutil
import pytest
import requests

from verl_cua.envs import InfraFailure, make_env
from verl_cua.envs.osworld import desktop_a11y
from verl_cua.envs.osworld import local_desktop as ld
from verl_cua.envs.osworld.local_desktop import NETRC, DesktopStartError, LocalDesktop
from verl_cua.testing.desktops import running, wait_for

XTERM = {
    "id": "sandbox-xterm",
    "instruction": "Use the terminal.",
    "config": [{"type": "launch", "parameters": {"command": ["xterm", "-geometry", "80x20+10+10"]}}],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "cat ~/out.txt 2>/dev/null", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "ok\n"}},
    },
}


@pytest.fixture(scope="module")
def desktop(local_desktop):
    d = LocalDesktop(screen=(800, 600))
    d.start()
    yield d
    d.stop()


def _sh(desktop: LocalDesktop, script: str, timeout: float = 10) -> dict:
    """Run a bash script in the desktop, as the desktop user."""
    response = desktop.request("POST", "/run_bash_script", json={"script": script, "timeout": timeout}, timeout=60)
    return response.json()


def _launch(desktop: LocalDesktop, command: str) -> None:
    desktop.request("POST", "/setup/launch", json={"command": command, "shell": True}, timeout=10).raise_for_status()


def _sleepers(desktop: LocalDesktop) -> set[str]:
    """`sleep N` arguments of every live process in the desktop's tree (dbus-activated services included)."""
    out = set()
    for p in psutil.Process(desktop.proc.pid).children(recursive=True):
        try:
            cmd = p.cmdline()
            if p.status() != psutil.STATUS_ZOMBIE and cmd[:1] in (["sleep"], ["/bin/sleep"]):
                out.add(cmd[-1])
        except psutil.Error:
            pass
    return out


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- 1. the token only in the server's memory ------------------------------------------------------------------
def test_the_token_is_in_no_file_and_the_apps_cannot_read_it_from_the_server(desktop):
    token = desktop.token.encode()
    for path in desktop.runtime.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert token not in path.read_bytes(), path
    server = desktop.request("GET", "/_verl_cua/health").json()["pid"]
    half = len(desktop.token) // 2
    a, b = desktop.token[:half], desktop.token[half:]
    script = (
        f"cat /proc/{server}/environ > /dev/null; head -c 1 /proc/{server}/mem > /dev/null; "
        # the pattern comes in through stdin, so that no command line holds the whole token
        f"printf '%s%s' {a} {b} | grep -laF -f /dev/stdin /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; "
        "echo END"
    )
    result = _sh(desktop, script)
    assert result["output"] == "END\n", result  # no process exposes it
    # the server is not even visible to the agent (another uid, /proc with hidepid; rootless: not dumpable)
    denied = "Permission denied" if desktop.identity.rootless else "No such file or directory"
    assert result["error"].count(denied) == 2, result


# -- 3. revert kills every process --------------------------------------------------------------------------------
def test_revert_kills_children_of_busy_threads_double_forked_and_spawned_during_the_kill(desktop):
    # a command still in flight: its bash is a child of a live handler thread, not of the server's main thread
    def in_flight() -> None:
        with contextlib.suppress(requests.ConnectionError):  # its sandbox ends under it
            _sh(desktop, "sleep 1010; true", 30)

    busy = threading.Thread(target=in_flight, daemon=True)
    busy.start()
    # one that answers SIGTERM by forking a new process (not in any snapshot taken before the SIGTERM)
    _launch(desktop, "trap 'sleep 1012 &' TERM; while :; do sleep 0.1; done")
    _launch(desktop, "sleep 1001 & setsid sh -c 'sleep 1002 &'; while :; do sleep 1003 & sleep 0.05; done")
    desktop.request("POST", "/execute", json={"command": "setsid nohup sleep 1004 >/dev/null 2>&1 &", "shell": True})
    assert wait_for(lambda: {"1001", "1002", "1003", "1004", "1010"} <= _sleepers(desktop)), _sleepers(desktop)
    last_episode = desktop.pids()
    desktop.revert()  # a new sandbox: the last one's namespace ends whole
    assert _sleepers(desktop) == set()
    assert wait_for(lambda: running(last_episode) == [])  # every process of the last episode, its X server too
    infra = {desktop.host_pid(pid) for pid in desktop.request("GET", "/_verl_cua/health").json()["infra"].values()}
    infra |= {desktop.init.pid, *(p.pid for p in desktop.init.children())}  # the namespace's init and the server
    apps = [p for p in ld._namespace_processes(desktop.init) if p.pid not in infra]
    assert [p for p in apps if ld._running(p)] == []
    busy.join(10)


# -- 4. health needs Xvfb and openbox ----------------------------------------------------------------------------
def test_healthy_needs_the_server_xvfb_and_openbox(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        assert d.healthy()
        infra = {k: d.host_pid(v) for k, v in d.request("GET", "/_verl_cua/health").json()["infra"].items()}
        assert set(infra) == {"server", "xvfb", "openbox", "dbus", "launcher"} and None not in infra.values()
        os.kill(infra["openbox"], signal.SIGKILL)
        assert wait_for(lambda: not d.healthy())
        d.revert()  # a new sandbox, with its own window manager
        assert d.healthy()
        infra = {k: d.host_pid(v) for k, v in d.request("GET", "/_verl_cua/health").json()["infra"].items()}
        os.kill(infra["xvfb"], signal.SIGKILL)
        assert wait_for(lambda: not d.healthy())
        assert d.alive()  # the sandbox still runs: only health notices
    finally:
        d.stop()


# -- 5. env: dead desktop during evaluate, broken reset ------------------------------------------------------------
def _kill_xvfb(env) -> None:
    health = env.local.request("GET", "/_verl_cua/health").json()
    xvfb = env.local.host_pid(health["infra"]["xvfb"])
    os.kill(xvfb, signal.SIGKILL)
    # SIGKILL lands asynchronously: the scenario begins once Xvfb is really gone (a zombie until the server reaps it)
    assert wait_for(lambda: _dead(xvfb))


def test_a_score_the_evaluator_computed_is_kept_when_the_desktop_dies_during_evaluate(local_desktop, monkeypatch):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.1, screen=(800, 600))
    try:
        env.reset(XTERM)
        _sh(env.local, "echo ok > ~/out.txt")
        original = env.desktop_env.evaluate

        def dying_evaluate():
            score = original()
            _kill_xvfb(env)  # after the metric: its score stands
            return score

        monkeypatch.setattr(env.desktop_env, "evaluate", dying_evaluate)
        assert env.evaluate() == 1.0 and not env.desktop_broken
    finally:
        env.close()


def test_a_desktop_dead_before_any_action_is_an_infra_failure_at_evaluate(local_desktop):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.1, screen=(800, 600))
    try:
        env.reset(XTERM)
        _kill_xvfb(env)  # no action was sent: the agent cannot have done it
        with pytest.raises(InfraFailure, match="not healthy before evaluate"):
            env.evaluate()
    finally:
        env.close()


def test_a_broken_screenshot_at_reset_is_an_infra_failure(local_desktop, monkeypatch):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.1, screen=(800, 600))
    try:
        monkeypatch.setattr(env.desktop_env, "_get_obs", lambda: {"screenshot": b"not a png"})
        with pytest.raises(InfraFailure, match="reset of sandbox-xterm failed: UnidentifiedImageError"):
            env.reset(XTERM)
    finally:
        env.close()


# -- 6. revert removes what the agent made read-only ----------------------------------------------------------------
def test_revert_removes_read_only_trees_and_restores_home_exactly(desktop):
    _sh(
        desktop,
        "mkdir -p ~/ro/a/b ~/Documents/mine && touch ~/ro/a/b/f ~/Documents/mine/g && chmod 500 ~/ro/a/b ~/ro/a && "
        "chmod 000 ~/ro && chmod 555 ~/Documents/mine ~/Documents && ln -s / ~/root-link && chmod 500 ~",
    )
    desktop.revert()
    template = desktop.runtime / "pub" / "home_template"
    # HOME is the template's copy, plus what openbox writes at start (its cache) in every new sandbox
    find = "find . -path ./.cache -prune -o -printf '%p %M\\n' | sort"
    listing = _sh(desktop, f"cd ~ && {find}")["output"]
    expected = subprocess.run(["sh", "-c", f"cd {template} && {find}"], capture_output=True)
    assert listing.replace(". drwx------", ". drwxr-xr-x") == expected.stdout.decode()


# -- 7. stop: frozen server, SIGTERM ignored ------------------------------------------------------------------------
def test_stop_kills_a_frozen_server_and_sigterm_ignorers(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        _launch(d, "trap '' TERM; while :; do sleep 1007; done")
        assert wait_for(lambda: "1007" in _sleepers(d))
        server = d.host_pid(d.request("GET", "/_verl_cua/health").json()["pid"])
        os.kill(server, signal.SIGSTOP)  # the agent can freeze its own server
        procs = [psutil.Process(pid) for pid in d.pids()]
        assert len(procs) >= 6
        d.stop()
        assert [p for p in procs if ld._running(p)] == []
    finally:
        d.stop()


# -- 8. locking ------------------------------------------------------------------------------------------------
def test_stop_waits_for_an_alive_check_in_flight(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    sleeper = psutil.Process(subprocess.Popen(["sleep", "60"]).pid)
    entered, release = threading.Event(), threading.Event()

    class SlowInit:  # the namespace's init, whose status query blocks
        pid = sleeper.pid

        def is_running(self):
            entered.set()
            release.wait(5)
            return True

        def status(self):
            return psutil.STATUS_SLEEPING

        def children(self, recursive=False):
            return []

        def kill(self):
            sleeper.kill()

        def wait(self, timeout=None):
            return sleeper.wait(timeout)

    d.init = SlowInit()
    checker = threading.Thread(target=d.alive)
    checker.start()
    assert entered.wait(5)
    stopper = threading.Thread(target=d.stop)
    stopper.start()
    time.sleep(0.3)
    try:
        assert stopper.is_alive()  # stop() waits for alive() to finish instead of pulling init from under it
    finally:
        release.set()
        checker.join(5)
        stopper.join(20)
    assert d.init is None and not ld._running(sleeper)


# -- 9. deadlines in the server ------------------------------------------------------------------------------------
def test_a_command_whose_child_keeps_the_pipe_open_returns_and_a_hanging_one_times_out(desktop):
    start = time.monotonic()
    result = _sh(desktop, "setsid sleep 1009 & echo started", timeout=30)  # done; its detached child holds stdout
    assert result["returncode"] == 0 and result["output"] == "started\n", result
    assert time.monotonic() - start < 15
    start = time.monotonic()
    result = _sh(desktop, "echo begun; setsid sleep 1011 & sleep 1013", timeout=1)
    assert result["returncode"] == -1 and "timed out after 1 s" in result["error"], result
    assert result["output"] == "begun\n" and time.monotonic() - start < 15
    desktop.revert()


def test_command_output_is_cut_at_the_cap_and_costs_the_server_no_memory(desktop):
    cap = desktop.limits.max_output
    result = _sh(desktop, f"head -c {50 * cap} /dev/zero | tr '\\0' x; echo; echo err >&2", timeout=60)
    assert result["returncode"] == 0 and result["error"] == "err\n", result["error"][:200]
    assert result["output"] == "x" * cap + f"\n[output cut at {cap} bytes]"


class _SlowNode:
    """A fake AT-SPI accessible whose every child call takes 50 ms (a hung or huge app)."""

    name, childCount = "xterm", 1000

    def getRoleName(self):
        return "frame"

    def getChildAtIndex(self, i):
        time.sleep(0.05)
        return _SlowNode()

    def getState(self):
        return types.SimpleNamespace(getStates=lambda: [])

    def getAttributes(self):
        return []


@pytest.mark.parametrize("walk", [desktop_a11y.terminal_text, desktop_a11y.accessibility_tree])
def test_at_spi_walks_stop_at_their_deadline(walk, monkeypatch):
    root = types.SimpleNamespace(childCount=3, getChildAtIndex=lambda i: _SlowNode())
    fake = types.SimpleNamespace(Registry=types.SimpleNamespace(getDesktop=lambda n: root))
    monkeypatch.setitem(sys.modules, "pyatspi", fake)
    start = time.monotonic()
    walk(deadline=time.monotonic() + 0.5)
    assert time.monotonic() - start < 2.0


# -- 10. rootless needs user namespaces; proxy; netrc -----------------------------------------------------------------
def test_without_root_and_without_user_namespaces_one_line_names_what_to_do(monkeypatch):
    monkeypatch.setattr(ld.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(ld.sandbox, "rootless_supported", lambda: "unprivileged user namespaces are off (denied)")
    with pytest.raises(DesktopStartError, match="cannot build a rootless sandbox here: unprivileged user namespaces"
                       r".*run as root.*or use a VM provider") as info:  # fmt: skip
        LocalDesktop()
    assert "\n" not in str(info.value)


def test_requests_to_the_desktop_never_go_through_the_users_proxy(desktop, monkeypatch):
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setenv("no_proxy", "example.com")
    NETRC.ensure()  # what the env does before each reset/step/evaluate
    assert "example.com" in os.environ["no_proxy"] and "example.com" in os.environ["NO_PROXY"]
    assert desktop.request("GET", "/screenshot", timeout=10).status_code == 200
    from desktop_env.controllers.python import PythonController

    controller = PythonController(vm_ip=desktop.host, server_port=desktop.port)
    assert controller.get_vm_screen_size() == {"width": 800, "height": 600}
    assert not requests.utils.should_bypass_proxies("http://127.78.0.1:80/", None)  # only the desktops' range


def test_the_netrc_directory_is_removed_at_exit(tmp_path):
    code = (
        "from verl_cua.envs.osworld.local_desktop import NETRC; NETRC.add('127.77.9.9', 'x' * 32); print(NETRC._path)"
    )
    env = {**os.environ, "NETRC": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    path = Path(out.stdout.strip())
    assert path.name == "netrc" and not path.parent.exists()


# -- 11. the X server: no TCP; its abstract socket its own -------------------------------------------------------------
SQUAT = (  # an agent's fake X server on the name libxcb tries first (the server's X clients would connect to it)
    "import socket; s = socket.socket(socket.AF_UNIX)\n"
    "try:\n    s.bind(b'\\0/tmp/.X11-unix/X{display}'); print('BOUND')\nexcept OSError as e:\n    print(e.errno)\n"
)


def test_x_server_listens_on_its_private_sockets_only_and_no_agent_can_take_its_abstract_name(desktop):
    sockets = Path("/proc/net/unix").read_text()
    assert f"@/tmp/.X11-unix/X{desktop.display}" not in sockets  # the host's namespace: the desktop's is its own
    squat = SQUAT.format(display=desktop.display)
    assert _sh(desktop, f"python3 -c {shlex.quote(squat)}")["output"] == "98\n"  # EADDRINUSE: Xvfb holds it
    listening = {c.laddr.port for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    assert 6000 + desktop.display not in listening
    assert _sh(desktop, "xdpyinfo >/dev/null && echo ok")["output"] == "ok\n"  # the desktop's own clients connect
