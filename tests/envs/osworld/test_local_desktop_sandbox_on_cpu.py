"""The local desktop as a sandbox for hostile agent code: root-owned runtime, token only in the server's memory,
nested hidden paths, fail-closed hiding, revert that leaves no process and no read-only leftovers, health that
needs Xvfb and openbox, stop that survives a frozen server, locking, server deadlines, proxy and netrc hygiene."""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import psutil
import pytest
import requests

from verl_cua.envs import InfraFailure, make_env
from verl_cua.envs.osworld import desktop_a11y, desktop_server
from verl_cua.envs.osworld import local_desktop as ld
from verl_cua.envs.osworld.local_desktop import DESKTOP_USER, NETRC, DesktopStartError, LocalDesktop

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


def _wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- 1. root-owned runtime; the token only in the server's memory ------------------------------------------------
def test_runtime_is_root_owned_except_home_and_xdg_and_the_agent_cannot_change_it(desktop):
    uid = pwd.getpwnam(DESKTOP_USER).pw_uid
    runtime = desktop.runtime
    own = {runtime / "home", runtime / "xdg"}
    for path in [runtime, *runtime.rglob("*")]:
        st = path.lstat()
        if path in own or any(o in path.parents for o in own):
            assert st.st_uid == uid, path
            continue
        assert st.st_uid == 0, path
        assert not st.st_mode & 0o022, f"{path} is group/other writable"
    targets = [runtime / "bin" / "chromium", runtime / "server" / "desktop_server.py"]
    targets += [runtime / "home_template" / "Desktop" / ".keep"]
    script = "".join(f"echo x >> {t} && echo WROTE {t}; " for t in targets)
    script += f"touch {runtime}/home_template/new && echo WROTE new; chmod 777 {runtime}/bin && echo WROTE chmod; "
    script += f"mv {runtime}/bin {runtime}/bin2 && echo WROTE mv; rm -rf {runtime}/home_template && echo WROTE rm"
    result = _sh(desktop, script)
    assert "WROTE" not in result["output"], result
    assert result["error"].count("Permission denied") >= len(targets), result


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
    assert result["error"].count("Permission denied") == 2, result  # the server is not dumpable


# -- 2. hidden paths: only the outermost; fail closed ------------------------------------------------------------
@pytest.fixture
def nested_tree(monkeypatch):
    """A fake HOME holding a fake repo holding the working directory (outside /tmp, which is always private)."""
    root = Path(tempfile.mkdtemp(prefix="verl-cua-nested-", dir="/var/tmp"))
    home, repo = root / "home", root / "home" / "repo"
    (repo / "sub").mkdir(parents=True)
    (home / "secret-home.txt").write_text("home secret")
    (repo / "secret-repo.txt").write_text("repo secret")
    root.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(ld, "REPO_ROOT", repo)
    monkeypatch.chdir(repo / "sub")
    yield home, repo
    subprocess.run(["rm", "-rf", str(root)], check=False)


def test_hidden_paths_keeps_only_the_outermost_path(nested_tree):
    home, _repo = nested_tree
    assert ld.hidden_paths() == [str(home)]


def test_a_hidden_path_holding_what_the_desktop_needs_is_refused(nested_tree, monkeypatch):
    home, _repo = nested_tree
    monkeypatch.setattr(ld, "RUNTIME_ROOT", home / "runtime")
    (home / "runtime").mkdir()
    with pytest.raises(DesktopStartError, match="cannot hide .* set VERL_CUA_DESKTOP_RUNTIME"):
        ld.hidden_paths()


def test_nested_repo_home_and_cwd_all_stay_hidden_from_the_desktop(local_desktop, nested_tree):
    home, repo = nested_tree
    d = LocalDesktop(screen=(640, 480))
    d.start()  # before the fix, the nested mount failed and the desktop never started
    try:
        result = _sh(d, f"cat {home}/secret-home.txt {repo}/secret-repo.txt {repo}/sub; ls {home}; echo END")
        assert result["output"] == "END\n", result
        assert "secret" not in result["output"]
        assert result["error"].count("Permission denied") >= 3, result
    finally:
        d.stop()


def test_a_hide_mount_that_fails_stops_the_start_with_one_line(local_desktop, monkeypatch):
    monkeypatch.setattr(ld, "hidden_paths", lambda: ["/nonexistent/verl-cua-hide-me"])
    d = LocalDesktop(screen=(640, 480))
    with pytest.raises(DesktopStartError, match="sandbox could not be set up.*cannot hide /nonexistent") as info:
        d.start()
    assert "\n" not in str(info.value)
    assert d.proc is None and d.runtime is None


# -- 3. revert kills every process --------------------------------------------------------------------------------
def test_revert_kills_children_of_busy_threads_double_forked_and_spawned_during_the_kill(desktop):
    # a command still in flight: its bash is a child of a live handler thread, not of the server's main thread
    busy = threading.Thread(target=_sh, args=(desktop, "sleep 1010; true", 30), daemon=True)
    busy.start()
    # one that answers SIGTERM by forking a new process (not in any snapshot taken before the SIGTERM)
    _launch(desktop, "trap 'sleep 1012 &' TERM; while :; do sleep 0.1; done")
    _launch(desktop, "sleep 1001 & setsid sh -c 'sleep 1002 &'; while :; do sleep 1003 & sleep 0.05; done")
    desktop.request("POST", "/execute", json={"command": "setsid nohup sleep 1004 >/dev/null 2>&1 &", "shell": True})
    assert _wait_for(lambda: {"1001", "1002", "1003", "1004", "1010"} <= _sleepers(desktop)), _sleepers(desktop)
    result = desktop.request("POST", "/_verl_cua/revert", timeout=60).json()
    assert result["left"] == [] and result["killed"], result
    assert _sleepers(desktop) == set()
    server = desktop.request("GET", "/_verl_cua/health").json()
    infra = set(server["infra"].values())
    apps = [p for p in psutil.Process(server["pid"]).children(recursive=True) if p.pid not in infra]
    assert [p for p in apps if p.status() != psutil.STATUS_ZOMBIE] == []
    busy.join(10)


# -- 4. health needs Xvfb and openbox ----------------------------------------------------------------------------
def test_healthy_needs_the_server_xvfb_and_openbox(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        assert d.healthy()
        infra = d.request("GET", "/_verl_cua/health").json()["infra"]
        assert set(infra) == {"server", "xvfb", "openbox"}
        os.kill(infra["openbox"], signal.SIGKILL)
        assert _wait_for(lambda: not d.healthy())
        d.request("POST", "/_verl_cua/revert", timeout=60).raise_for_status()  # respawns the window manager
        assert d.healthy()
        os.kill(infra["xvfb"], signal.SIGKILL)
        assert _wait_for(lambda: not d.healthy())
        assert d.alive()  # the sandbox still runs: only health notices
    finally:
        d.stop()


# -- 5. env: dead desktop during evaluate, broken reset ------------------------------------------------------------
def test_a_desktop_that_dies_during_evaluate_is_an_infra_failure_not_a_zero(local_desktop, monkeypatch):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.1, screen=(800, 600))
    try:
        env.reset(XTERM)
        original = env.desktop_env.evaluate

        def dying_evaluate():
            infra = env.local.request("GET", "/_verl_cua/health").json()["infra"]
            os.kill(infra["xvfb"], signal.SIGKILL)
            # SIGKILL lands asynchronously: on a loaded machine Xvfb can outlive a fast metric, so the scenario
            # "died during evaluate" begins once it is really gone (a zombie until the server reaps it)
            assert _wait_for(lambda: _dead(infra["xvfb"]))
            return original()  # OSWorld's getter swallows what fails: this alone would score 0

        monkeypatch.setattr(env.desktop_env, "evaluate", dying_evaluate)
        with pytest.raises(InfraFailure, match="not healthy after evaluating"):
            env.evaluate()
    finally:
        env.close()


def test_a_broken_screenshot_at_reset_is_an_infra_failure(local_desktop, monkeypatch):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.1, screen=(800, 600))
    try:
        monkeypatch.setattr(env.desktop_env, "reset", lambda task_config: {"screenshot": b"not a png"})
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
    result = desktop.request("POST", "/_verl_cua/revert", timeout=60)
    assert result.status_code == 200, result.text
    template = desktop.runtime / "home_template"
    listing = _sh(desktop, "cd ~ && find . -printf '%p %M\\n' | sort")["output"]
    expected = subprocess.run(["sh", "-c", f"cd {template} && find . -printf '%p %M\\n' | sort"], capture_output=True)
    assert listing.replace(". drwx------", ". drwxr-xr-x") == expected.stdout.decode()


def test_restore_tree_raises_when_home_does_not_match_the_template(tmp_path, monkeypatch):
    template, target = tmp_path / "template", tmp_path / "home"
    (template / "d").mkdir(parents=True)
    (template / "d" / "f").write_text("template")
    (target / "junk" / "deep").mkdir(parents=True)
    (target / "junk" / "deep").chmod(0o500)
    (target / "junk").chmod(0o000)
    desktop_server._restore_tree(str(template), str(target))
    assert sorted(p.name for p in target.iterdir()) == ["d"]
    real = desktop_server.shutil.copytree

    def lossy(src, dst, *args, **kwargs):
        out = real(src, dst, *args, **kwargs)
        if Path(dst) == target:
            (target / "d" / "f").write_text("changed")
        return out

    monkeypatch.setattr(desktop_server.shutil, "copytree", lossy)
    with pytest.raises(RuntimeError, match="does not match its template"):
        desktop_server._restore_tree(str(template), str(target))


# -- 7. stop: frozen server, SIGTERM ignored, strays in the namespace ------------------------------------------------
def test_stop_kills_a_frozen_server_sigterm_ignorers_and_strays_in_its_namespace(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    d.start()
    stray = None
    try:
        _launch(d, "trap '' TERM; while :; do sleep 1007; done")
        assert _wait_for(lambda: "1007" in _sleepers(d))
        stray = subprocess.Popen(["nsenter", f"--mount=/proc/{d.proc.pid}/ns/mnt", "sleep", "1008"])
        assert _wait_for(lambda: stray.pid in d.pids())
        server = d.request("GET", "/_verl_cua/health").json()["pid"]
        os.kill(server, signal.SIGSTOP)  # the agent can freeze its own server
        procs = [psutil.Process(pid) for pid in d.pids()]
        d.stop()
        assert stray.wait(timeout=5) is not None
        for p in procs:
            assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, p
    finally:
        d.stop()
        if stray is not None and stray.poll() is None:
            stray.kill()


# -- 8. locking ------------------------------------------------------------------------------------------------
def test_stop_waits_for_an_alive_check_in_flight(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    sleeper = subprocess.Popen(["sleep", "60"])
    entered, release = threading.Event(), threading.Event()

    class SlowProc:
        pid = sleeper.pid
        stdin = sleeper.stdin  # None: the sleeper has no lifeline pipe

        def poll(self):
            entered.set()
            release.wait(5)
            return None

        def wait(self, timeout=None):
            return sleeper.wait(timeout)

    d.proc = SlowProc()
    checker = threading.Thread(target=d.alive)
    checker.start()
    assert entered.wait(5)
    stopper = threading.Thread(target=d.stop)
    stopper.start()
    time.sleep(0.3)
    try:
        assert stopper.is_alive()  # stop() waits for alive() to finish instead of pulling proc from under it
    finally:
        release.set()
        checker.join(5)
        stopper.join(20)
    assert d.proc is None and sleeper.poll() is not None


def test_a_desktop_user_created_concurrently_is_picked_up(local_desktop, monkeypatch):
    real = pwd.getpwnam
    calls = []

    def not_yet(name):
        calls.append(name)
        if len(calls) == 1:
            raise KeyError(name)  # as if another process ran useradd between our lookup and ours
        return real(name)

    monkeypatch.setattr(ld.pwd, "getpwnam", not_yet)
    assert ld._desktop_user() == (real(DESKTOP_USER).pw_uid, real(DESKTOP_USER).pw_gid)
    assert len(calls) == 2


# -- 9. deadlines in the server ------------------------------------------------------------------------------------
def test_a_timed_out_command_whose_child_keeps_the_pipe_open_still_returns(desktop):
    start = time.monotonic()
    result = _sh(desktop, "setsid sleep 1009 & echo started", timeout=1)
    assert result["returncode"] == -1 and "timed out" in result["error"], result
    assert result["output"].startswith("started")
    assert time.monotonic() - start < 15
    desktop.request("POST", "/_verl_cua/revert", timeout=60).raise_for_status()


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


def test_server_cuts_a_hanging_call_off(monkeypatch):
    with pytest.raises(TimeoutError):
        desktop_server._within(0.2, time.sleep, 5)
    assert desktop_server._within(1, lambda: 7) == 7


# -- 10. root only; proxy; netrc -------------------------------------------------------------------------------------
def test_non_root_is_refused_with_one_line_naming_what_to_do(monkeypatch):
    monkeypatch.setattr(ld.os, "geteuid", lambda: 1000)
    with pytest.raises(DesktopStartError, match="must be started as root.*run as root, or use a VM provider") as info:
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


# -- 11. the X server: no TCP, no abstract socket ---------------------------------------------------------------------
def test_x_server_listens_on_its_private_unix_socket_only(desktop):
    sockets = Path("/proc/net/unix").read_text()
    assert f"@/tmp/.X11-unix/X{desktop.display}" not in sockets  # abstract sockets are network-namespace wide
    listening = {c.laddr.port for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    assert 6000 + desktop.display not in listening
    assert _sh(desktop, "xdpyinfo >/dev/null && echo ok")["output"] == "ok\n"  # the desktop's own clients connect


def test_the_desktop_cannot_reach_host_services_but_the_cdp_relay_works(desktop):
    uid = pwd.getpwnam(DESKTOP_USER).pw_uid
    if shutil.which("iptables") is None:
        message = "iptables missing: apt-get install -y iptables (envs/local_desktop/setup.sh installs it)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    rules = lambda: subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout  # noqa: E731
    ld.FIREWALL._installed.clear()
    ld.FIREWALL.install(uid)  # drops the openings of owners earlier tests killed
    before = rules()
    ld.FIREWALL._installed.clear()
    assert ld.FIREWALL.install(uid) and ld.FIREWALL.install(uid)
    assert rules() == before  # idempotent
    assert before.count(f"--uid-owner {uid}") == 1 and f"verl-cua-desktop:cdp:{os.getpid()}" in before
    # the opened port is one the kernel never hands to a service that binds port 0, like the listener below
    assert desktop._cdp_internal < int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    listener = socket.create_server(("0.0.0.0", 0))  # a host service (Ray's dashboard, a trainer port...)
    port = listener.getsockname()[1]
    hosts = ["127.0.0.1", "127.0.0.2", desktop.host, "169.254.169.254"]
    hosts += [a.address for addrs in psutil.net_if_addrs().values() for a in addrs if a.family == socket.AF_INET]
    try:
        script = "".join(
            f"timeout 3 bash -c 'exec 3<>/dev/tcp/{h}/{port}' 2>/dev/null && echo OPEN {h} || echo closed {h}; "
            for h in hosts
        )
        result = _sh(desktop, script, timeout=60)
        assert "OPEN" not in result["output"] and result["output"].count("closed") == len(hosts), result
    finally:
        listener.close()
    _launch(desktop, "chromium about:blank")
    assert _wait_for(lambda: _cdp(desktop) == 200, timeout=30)  # the relay reaches Chromium's 127.0.0.1 port
    desktop.request("POST", "/_verl_cua/revert", timeout=60).raise_for_status()


def test_cdp_openings_of_processes_that_are_gone_are_dropped_by_the_next_install(desktop):
    if shutil.which("iptables") is None:
        message = "iptables missing: apt-get install -y iptables (envs/local_desktop/setup.sh installs it)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    uid = pwd.getpwnam(DESKTOP_USER).pw_uid
    gone = subprocess.Popen(["true"])
    gone.wait()
    tagged = lambda port, comment: ["-d", "127.0.0.1/32", "-p", "tcp", "--dport", str(port), "-m", "comment",  # noqa: E731
                                    "--comment", comment, "-j", "ACCEPT"]  # fmt: skip
    leaked = [tagged(40001, f"verl-cua-desktop:cdp:{gone.pid}"), tagged(40003, "verl-cua-desktop:cdp")]
    for rule in leaked:  # a trainer SIGKILLed mid-run, and a rule of a verl-cua that named no owner
        subprocess.run(["iptables", "-I", ld.FIREWALL_CHAIN, "1", *rule], check=True)
    chain = lambda: subprocess.run(["iptables", "-S", ld.FIREWALL_CHAIN], capture_output=True, text=True).stdout  # noqa: E731
    assert "dport 40001" in chain() and "dport 40003" in chain()
    ld.FIREWALL._installed.clear()
    assert ld.FIREWALL.install(uid)
    after = chain()
    assert "dport 40001" not in after and "dport 40003" not in after
    # this process's desktop keeps its opening, ahead of the rejects, and the relay still reaches Chromium
    own = f'--dport {desktop._cdp_internal} -m comment --comment "verl-cua-desktop:cdp:{os.getpid()}" -j ACCEPT'
    assert own in after and after.index(own) < after.index("REJECT")
    _launch(desktop, "chromium about:blank")
    assert _wait_for(lambda: _cdp(desktop) == 200, timeout=30)
    desktop.request("POST", "/_verl_cua/revert", timeout=60).raise_for_status()


def test_the_opened_cdp_port_lies_below_the_kernels_automatic_range():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {ld._port_below_auto_range() for _ in range(20)}
    assert all(1024 <= p < low for p in ports) and len(ports) > 1
    for port in ports:  # each was free when chosen
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def _cdp(desktop: LocalDesktop) -> int:
    try:
        return requests.get(f"http://{desktop.host}:{desktop.cdp_port}/json/version", timeout=2).status_code
    except requests.RequestException:
        return 0


def test_without_iptables_one_warning_and_the_desktop_still_starts(monkeypatch, caplog):
    real = shutil.which
    monkeypatch.setattr(ld.shutil, "which", lambda b: None if b in ("iptables", "ip6tables") else real(b))
    firewall = ld._Firewall()
    with caplog.at_level("WARNING", logger=ld.__name__):
        assert not firewall.install(12345) and not firewall.install(12345)
    warnings = [r.getMessage() for r in caplog.records if "iptables" in r.getMessage()]
    assert len(warnings) == 1 and "apt-get install -y iptables" in warnings[0] and "\n" not in warnings[0]
    assert firewall.allow_cdp(1234) is None
