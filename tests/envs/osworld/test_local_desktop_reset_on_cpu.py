"""Attacks on the local desktop's reset and on who is blamed for a broken desktop, run as hostile model output would
run them (as the desktop's user, typed into its xterm or through its server), each on a real desktop driven by
OSWorld's own client and evaluators: state kept in the X server, a process the revert cannot see (a zombie leader,
a fork-on-SIGTERM loop), code run by the window manager, IPC and the uid's keyrings, the desktop killed as the last
action, a module shadowing the evaluator's, a FIFO fetched by the evaluator, the host's disk, one desktop's CPU
against another's, and the trainer's CDP client sent elsewhere. Network probes target only this machine's loopback.
"""

import json
import os
import shlex
import socket
import subprocess
import threading
import time

import psutil
import pytest
import requests

from verl_cua.envs import EnvPool, make_env
from verl_cua.envs.osworld import cdp_pin, sandbox
from verl_cua.envs.osworld.local_desktop import DESKTOP_VENV, LocalDesktop
from verl_cua.testing.desktops import running, wait_for

SCREEN = (800, 600)
DONE_CHECK = {"type": "vm_command_line", "command": "test -d ~/Documents/done && echo ok", "shell": True}
XTERM = [
    {"type": "launch", "parameters": {"command": ["xterm", "-geometry", "80x20+10+10"]}},
    {"type": "sleep", "parameters": {"seconds": 1.0}},
]
DONE = {  # a task whose success is a folder: what anything outliving its episode could recreate for the next one
    "id": "reset-mkdir",
    "instruction": "Create the folder ~/Documents/done.",
    "config": XTERM,
    "evaluator": {"func": "exact_match", "result": DONE_CHECK,
                  "expected": {"type": "rule", "rules": {"expected": "ok\n"}}},
}  # fmt: skip
LOOP = "while :; do mkdir -p ~/Documents/done; sleep 0.1; done"


def _env(**kwargs):
    return make_env("osworld", provider="local", action_format="pyautogui", pause=0.2, screen=SCREEN, **kwargs)


def _sh(desktop: LocalDesktop, script: str, timeout: float = 20) -> dict:
    """Run a bash script in the desktop as its user (what typed model output can do)."""
    response = desktop.request("POST", "/run_bash_script", json={"script": script, "timeout": timeout}, timeout=90)
    return response.json()


def _type(env, text: str):
    """One agent action: click the xterm and type `text` (a shell line) into it."""
    return env.step(f"pyautogui.click(200, 150); pyautogui.typewrite({text!r})")


# -- 1. nothing of an episode survives its reset -------------------------------------------------------------------
ZOMBIE_LEADER = (  # the main thread exits (the leader shows Z), a second thread keeps working
    "import ctypes, os, threading, time\n"
    "def work():\n"
    "    while True:\n"
    "        os.makedirs(os.path.expanduser('~/Documents/done'), exist_ok=True)\n"
    "        time.sleep(0.1)\n"
    "threading.Thread(target=work).start()\n"
    "time.sleep(0.2)\n"
    "ctypes.CDLL(None).pthread_exit(None)\n"
)
OPENBOX_MENU = f"""<?xml version="1.0" encoding="UTF-8"?>
<openbox_menu xmlns="http://openbox.org/3.4/menu">
<menu id="root-menu" label="Openbox 3">
  <item label="evil"><action name="Restart"><command>sh -c '{LOOP}'</command></action></item>
</menu>
</openbox_menu>
"""
X_STATE = (  # X server state an earlier episode could leave behind for the next one to read or suffer
    "xprop -root -f VERL_CUA_MARK 8s -set VERL_CUA_MARK carried; "
    "echo 'XTerm*background: red' | xrdb -merge; xset s 5; xmodmap -e 'keycode 38 = q'; "
    'ipcmk -M 1048576 >/dev/null; python3 -c "import ctypes; l = ctypes.CDLL(None); '
    "l.syscall(248, b'user', b'verl-cua-mark', b'carried', 7, -4)\"; echo planted"
)
X_STATE_READ = (
    "xprop -root VERL_CUA_MARK; xrdb -query | grep -c background; xset q | grep -c 'timeout:  5'; "
    "xmodmap -pke | grep -c '^keycode  38 = q'; ipcs -m | grep -c 1048576; grep -c verl-cua-mark /proc/keys"
)


SURVIVORS = {  # ways to keep working after the episode, each recreating the task's folder
    "zombie-leader": f"python3 -c {shlex.quote(ZOMBIE_LEADER)} >/dev/null 2>&1 &",
    "fork-on-sigterm": f'sh -c \'trap "sh -c \\"{LOOP}\\" &" TERM; {LOOP}\' >/dev/null 2>&1 &',
    # code in an infrastructure process: a menu entry whose Restart action openbox execs at its own pid
    "openbox-menu": f"mkdir -p ~/.config/openbox && cat > ~/.config/openbox/menu.xml <<'EOF'\n{OPENBOX_MENU}EOF\n"
    "openbox --reconfigure; sleep 0.5; xdotool mousemove 700 500 click 3; sleep 0.5; xdotool key Down Return",
}


@pytest.fixture(scope="module")
def episodes(local_desktop):
    env = _env()
    yield env
    env.close()


@pytest.mark.parametrize("attack", list(SURVIVORS))
def test_nothing_an_episode_started_runs_in_the_next(episodes, attack):
    env = episodes
    env.reset(DONE)
    assert _sh(env.local, SURVIVORS[attack] + "\necho planted", timeout=30)["output"].endswith("planted\n")
    if attack == "openbox-menu":  # openbox read no menu from HOME: its process is still openbox (the host's view)
        time.sleep(1.0)
        pid = env.local.host_pid(env.local.request("GET", "/_verl_cua/health").json()["infra"]["openbox"])
        assert psutil.Process(pid).name() == "openbox"
    else:
        assert wait_for(lambda: "done" in _sh(env.local, "ls ~/Documents")["output"])
        assert env.evaluate() == 1.0  # the attack works within its own episode
    before = env.local.pids()
    env.reset(DONE)  # the next episode: nothing of the last one may run or remain
    time.sleep(1.0)  # a survivor would have recreated the folder by now
    assert env.evaluate() == 0.0
    assert wait_for(lambda: running(before) == [], timeout=15)  # the last sandbox's every process, Xvfb too


def test_x_server_ipc_and_keyring_state_of_an_episode_is_gone_in_the_next(episodes):
    env = episodes
    env.reset(DONE)
    assert _sh(env.local, X_STATE, timeout=30)["output"].endswith("planted\n")
    out = _sh(env.local, X_STATE_READ)["output"].split("\n")
    # the probe sees what was planted, but no key: the keyring calls are denied in a desktop (seccomp)
    assert "carried" in out[0] and out[1:6] == ["1"] * 4 + ["0"], out
    env.reset(DONE)
    out = _sh(env.local, X_STATE_READ)["output"].split("\n")
    assert "no such atom" in out[0] and out[1:6] == ["0"] * 5, out


def test_the_uids_keyrings_are_empty_after_close_and_at_the_next_start(local_desktop):
    if os.geteuid() != 0:
        pytest.skip("rootless desktops get a user namespace (and fresh keyrings) of their own")
    d = LocalDesktop(screen=(640, 480))
    d.start()
    ident = d.identity
    add = (
        "import ctypes; l = ctypes.CDLL(None, use_errno=True); "
        "print(l.syscall(248, b'user', b'verl-cua-mark', b'carried', 7, -4), ctypes.get_errno())"
    )
    try:  # add_key is denied inside (ENOSYS): a desktop can make no key to leave behind
        assert d.request("POST", "/run_python", json={"code": add}, timeout=30).json()["output"].split() == ["-1", "38"]
    finally:
        d.stop()
    sandbox.clear_keyrings(ident)  # the host's own clear and check, as at close, logs nothing on an empty keyring
    search = (  # KEYCTL_SEARCH the uid's user keyring for the key, as that uid (what the next desktop could do)
        "import ctypes; l = ctypes.CDLL(None, use_errno=True); "
        "print(l.syscall(250, 10, -4, b'user', b'verl-cua-mark', 0), ctypes.get_errno())"
    )
    as_uid = ["setpriv", f"--reuid={ident.uid}", f"--regid={ident.gid}", "--clear-groups", "/usr/bin/python3", "-S"]
    found = subprocess.run([*as_uid, "-c", search], capture_output=True, text=True, timeout=30)
    assert found.stdout.split() == ["-1", "126"], found  # ENOKEY: nothing left for the next desktop in the slot


# -- 2. a desktop the agent breaks is the agent's failure ------------------------------------------------------------
FAILING = {**DONE, "id": "reset-fail"}  # never solved here: the agent's only way out of a 0 would be a masked row


@pytest.mark.parametrize("attack", ["kill -9 -1", "kill -STOP -1"])
def test_killing_the_desktop_as_the_last_action_scores_zero_and_is_not_masked(local_desktop, attack):
    # every process the agent may signal: its session (window manager, bus, launcher); in a rootless desktop the
    # server too. An action its stopped launcher never runs times out (action_timeout 5 s): the agent's failure
    with EnvPool(lambda: _env(action_timeout=5), 1) as pool:
        with pool.acquire() as lease:
            lease.reset(FAILING)
            assert not lease.infra_failure
            result = lease.step(f"pyautogui.click(200, 150); pyautogui.typewrite({attack + chr(10)!r})")
            assert not result.info["infra_failure"]
            if not result.done:  # the screenshot came back before the desktop went: the next look finds it broken
                time.sleep(1.0)
            assert lease.evaluate() == 0.0
            assert not lease.infra_failure, lease.error
            # killed: the desktop is broken; stopped: broken if the action was still running, else scored as is
            assert lease.desktop_broken or attack == "kill -STOP -1", lease.error
        assert pool.stats()["infra_failures"] == 0
        with pool.acquire() as lease:  # the slot serves the next episode on a fresh desktop
            lease.reset(FAILING)
            assert not lease.infra_failure and lease.evaluate() == 0.0 and not lease.desktop_broken


# -- 3. the evaluator's code is the evaluator's ----------------------------------------------------------------------
SHADOWED = {
    **DONE,
    "id": "reset-shadow",
    "evaluator": {
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "shell": True,
            "command": "python3 -c \"import os, pyautogui; print('ok' if os.path.isdir(os.path.expanduser("
            "'~/Documents/done')) else 'no')\"",
        },  # fmt: skip
        "expected": {"type": "rule", "rules": {"expected": "ok\n"}},
    },
}
SHADOW = "print('ok'); raise SystemExit"


def test_a_module_the_agent_leaves_in_home_never_answers_the_evaluator(local_desktop):
    env = _env()
    try:
        env.reset(SHADOWED)
        site = "~/.local/lib/python3.11/site-packages"
        plant = f"printf '%s\\n' {shlex.quote(SHADOW)}"
        _sh(env.local, f"mkdir -p {site}; for d in ~ {site}; do {plant} > $d/pyautogui.py; done")
        assert env.evaluate() == 0.0  # the folder does not exist: the shadow module's "ok" is never read
        controller = env.desktop_env.controller
        where = controller.execute_python_command("print(pyautogui.__file__)")["output"].strip()
        assert where.startswith(os.path.realpath(DESKTOP_VENV)) or where.startswith(DESKTOP_VENV), where
        ran = env.local.request("POST", "/run_python", json={"code": "import os, pyautogui; print(os.getcwd())"})
        assert ran.json()["output"] == "/\n"
    finally:
        env.close()


def test_a_fifo_in_place_of_a_file_costs_the_evaluator_no_wait(local_desktop):
    from desktop_env.controllers.python import PythonController

    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        _sh(d, "mkfifo ~/result.xlsx; ln -s /dev/zero ~/zero.xlsx")
        controller = PythonController(vm_ip=d.host, server_port=d.port)
        controller.retry_interval = 0.2
        start = time.monotonic()
        assert controller.get_file("~/result.xlsx") is None and controller.get_file("~/zero.xlsx") is None
        assert time.monotonic() - start < 10 and d.healthy()
    finally:
        d.stop()


# -- 4. nothing the agent writes reaches the host --------------------------------------------------------------------
MOUNTS = (
    "import json\n"
    "out = []\n"
    "for line in open('/proc/self/mountinfo'):\n"
    "    head, tail = line.split(' - ')\n"
    "    fields = head.split()\n"
    "    out.append([fields[4], fields[5].split(',')[0], tail.split()[0]])\n"
    "print(json.dumps(out))\n"
)
PRIVATE_FS = {"tmpfs", "proc", "devpts", "mqueue"}  # the sandbox's own: they vanish with it
DEVICES = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}  # nodes, not a disk


def test_every_writable_mount_in_the_desktop_is_its_own(local_desktop):
    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        mounts = json.loads(d.request("POST", "/run_python", json={"code": MOUNTS}, timeout=30).json()["output"])
        writable = [(point, fs) for point, mode, fs in mounts if mode == "rw"]
        assert writable and all(fs in PRIVATE_FS or point in DEVICES for point, fs in writable), writable
        infra = " ".join(str(p) for p in d.request("GET", "/_verl_cua/health").json()["infra"].values())
        out = _sh(d, f"for p in {infra}; do for f in 1 2; do echo x >> /proc/$p/fd/$f 2>/dev/null && echo W $p; done; "
                     "done; echo END")["output"]  # fmt: skip
        assert out == "END\n"  # no infrastructure output (the host's log) is the agent's to write
    finally:
        d.stop()


def test_the_desktops_log_on_the_host_is_capped(tmp_path):
    from verl_cua.envs.osworld import local_desktop

    flood = subprocess.Popen(["python3", "-c", "import sys\nfor _ in range(80): sys.stdout.write('x' * 65536)"],
                             stdout=subprocess.PIPE)  # fmt: skip
    local_desktop._drain_log(flood.stdout, tmp_path / "server.log", 1 << 20)
    flood.wait(30)
    assert wait_for(lambda: (tmp_path / "server.log").read_bytes().endswith(b"the rest is dropped]\n"))
    assert (1 << 20) <= (tmp_path / "server.log").stat().st_size < (1 << 20) + 200  # 5 MiB in, 1 MiB kept


# -- 5. one desktop's busy loops get its CPU quota and no more -------------------------------------------------------
def test_one_desktops_busy_loops_get_its_cpu_quota_and_no_more(local_desktop):
    """8 busy loops, a session each, use at most the desktop's quota (1 CPU), so on this 2-core machine a core is
    left to the other desktops. The CPU time its cgroup used is measured, not another desktop's slowdown: the suite's
    other worker loads the same cores and can only add to a slowdown (bench.envs reports it, on a quiet machine)."""
    if os.geteuid() != 0:
        pytest.skip("no cgroups without root: a rootless desktop's CPU is not bounded")
    from bench.envs import start_busy_loops

    desktop = LocalDesktop(screen=(640, 480))
    desktop.start()
    try:
        loops = start_busy_loops(desktop, 8, settle=1)
        assert len(loops) == 8

        def seconds() -> float:
            return sum(sum(p.cpu_times()[:2]) for p in loops)

        start, used = time.monotonic(), seconds()
        time.sleep(5)
        cpus = (seconds() - used) / (time.monotonic() - start)
        # the loops spin (beside a verl run they may get well under their quota), and never past it
        assert 0.05 < cpus <= desktop.limits.cpus * 1.1, cpus
    finally:
        desktop.stop()


# -- 6. the trainer talks only to the desktop ------------------------------------------------------------------------
FAKE_CDP = """
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"Browser": "Chrome/1", "webSocketDebuggerUrl": sys.argv[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", 9222), H).serve_forever()
"""


def test_a_fake_cdp_endpoint_cannot_send_the_trainers_browser_client_to_another_address(local_desktop):
    from playwright.sync_api import sync_playwright

    from verl_cua.envs.osworld import evaluators

    evaluators.install()  # what every OSWorld env does: Playwright's CDP connections pinned
    bait = socket.create_server(("127.0.0.1", 0))  # a host service the agent names: it must never hear from us
    bait.settimeout(0.2)
    hits = []

    def listen():
        while bait.fileno() >= 0:
            try:
                hits.append(bait.accept()[0])
            except OSError:
                if bait.fileno() < 0:
                    return

    threading.Thread(target=listen, daemon=True).start()
    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        target = f"ws://127.0.0.1:{bait.getsockname()[1]}/devtools/browser/x"
        launch = {"command": ["python3", "-c", FAKE_CDP, target]}
        d.request("POST", "/setup/launch", json=launch, timeout=10).raise_for_status()
        endpoint = f"http://{d.host}:{d.cdp_port}"
        assert wait_for(lambda: _json_version(endpoint).get("webSocketDebuggerUrl") == target, timeout=20)
        with sync_playwright() as p, pytest.raises(cdp_pin.CDPRedirectRefused, match="only ws://"):
            p.chromium.connect_over_cdp(endpoint)
        time.sleep(0.5)
        assert hits == []
    finally:
        d.stop()
        bait.close()


def _json_version(endpoint: str) -> dict:
    try:
        return requests.get(f"{endpoint}/json/version", timeout=5).json()
    except (requests.RequestException, ValueError):
        return {}


def test_sandbox_limits_name_the_cpu_quota_and_refuse_a_bad_one(monkeypatch):
    monkeypatch.setenv("VERL_CUA_DESKTOP_CPUS", "1.5")
    assert sandbox.Limits.from_env().cpus == 1.5
    monkeypatch.setenv("VERL_CUA_DESKTOP_CPUS", "lots")
    with pytest.raises(ValueError, match="VERL_CUA_DESKTOP_CPUS='lots': expected a positive number of CPUs"):
        sandbox.Limits.from_env()
