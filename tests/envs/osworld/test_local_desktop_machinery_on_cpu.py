"""The desktop's own machinery out of the agent's reach: one attack per class, on real desktops driven by OSWorld's
client and scored by its evaluators, each as hostile model output (or what it typed into a terminal) would run it.

Classes: an output that masks itself by running long; stopping, starving or tracing the server's commands; a score
forged into an evaluator command's pipe; an agent-written file that costs the host's metric minutes and gigabytes;
state that survives (a kernel key; an API-only episode that never marked its env used); a side channel on the host's
files (inotify); the CDP pin where only a LocalDesktop runs."""

import contextlib
import os
import resource
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from verl_cua.actions.runtime import CALL_SECONDS, CHAR_SECONDS, MAX_RUN_SECONDS
from verl_cua.envs import make_env
from verl_cua.envs.osworld.local_desktop import LocalDesktop
from verl_cua.envs.osworld.metric_child import ENTRY
from verl_cua.testing.bombs import cell_bomb

REPO_ROOT = Path(__file__).resolve().parents[3]
SCREEN = (640, 480)
# a getter's command as OSWorld's tasks write them (a Python one-liner); the marker lets the attack find it
DONE_CHECK = (
    "python3 -c \"import os; print('ok' if os.path.isdir(os.path.expanduser('~/Documents/done')) else 'no')\""
    " # probe-evaluator"
)
DONE = {  # never done by these attacks: a 1.0 can only be forged
    "id": "machinery-mkdir",
    "instruction": "Create the folder ~/Documents/done.",
    "config": [],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": DONE_CHECK, "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "ok\n"}},
    },
}
BOMB = {  # the agent's spreadsheet, read by the host's table metric
    "id": "machinery-table",
    "instruction": "Fill in ~/bomb.xlsx.",
    "config": [],
    "evaluator": {
        "func": "compare_table",
        "result": {"type": "vm_file", "path": "~/bomb.xlsx", "dest": "bomb.xlsx"},
        "options": {"rules": [{"type": "check_cell", "sheet_idx": 0, "coordinate": "A1",
                               "props": {"value": {"method": "eq", "ref": 1}}}]},
    },
}  # fmt: skip
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a second identity needs root (rootless: docs/sandbox.md)")


def _env(**kwargs):
    return make_env("osworld", provider="local", action_format="pyautogui", pause=0.2, screen=SCREEN, **kwargs)


def _sh(desktop: LocalDesktop, script: str, timeout: float = 20) -> dict:
    """A bash script run as the desktop's user (what typed model output can do)."""
    response = desktop.request("POST", "/run_bash_script", json={"script": script, "timeout": timeout}, timeout=90)
    return response.json()


def _daemon(desktop: LocalDesktop, code: str) -> int:
    """Leave a Python daemon of the agent's running in the desktop (detached, as a typed `setsid nohup` would);
    its host pid (the test checks it still runs when the attack is over)."""
    out = _sh(desktop, f"setsid nohup python3 -c {shlex.quote(code)} >/dev/null 2>&1 & echo $!")["output"]
    pid = desktop.host_pid(int(out))
    assert pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    return pid


@pytest.fixture(scope="module")
def env(local_desktop):
    env = _env()
    yield env
    env.close()


# -- 1. an output that runs past the action timeout -------------------------------------------------------------
def test_an_output_that_would_outrun_the_action_timeout_is_invalid_and_a_timeout_is_the_agents(local_desktop):
    env = _env(action_timeout=3)
    try:
        env.reset(DONE)
        for text, why in (("\n".join(["time.sleep(1)"] * 40), "40 waits"),
                          (f"pyautogui.write({'a' * 30000!r})", "30000 characters typed")):  # fmt: skip
            result = env.step(text)
            assert not result.info["action_valid"] and why in result.info["error"], result.info
            assert not result.done and not result.info["infra_failure"]
        # a valid output that still runs past this env's short action timeout: the agent's failure, never masked
        result = env.step("\n".join(["time.sleep(1)"] * 6))
        assert result.done and result.info.get("desktop_broken") and not result.info["infra_failure"], result.info
        assert env.evaluate() == 0.0
    finally:
        env.close()


def test_the_longest_write_the_bound_lets_through_runs_well_inside_the_action_timeout(env):
    env.reset(DONE)
    longest = int((MAX_RUN_SECONDS - CALL_SECONDS) / CHAR_SECONDS)
    start = time.monotonic()
    result = env.step(f"pyautogui.write({'a' * longest!r})")
    took = time.monotonic() - start
    assert result.info["action_valid"] and not result.done, result.info
    assert took < env.action_timeout, took  # the estimate is an upper bound: the env's timeout never fires on it


# -- 2. stopping, starving or tracing the server's commands; 3. a forged score -------------------------------------
FORGER = """
import os, signal, time
me, end = os.getpid(), time.time() + 120
while time.time() < end:
    for name in os.listdir('/proc'):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if b'probe-evaluator' not in open(f'/proc/{name}/cmdline', 'rb').read():
                continue
            os.kill(int(name), signal.SIGSTOP)
            with open(f'/proc/{name}/fd/1', 'w') as out:
                out.write('ok\\n')
            os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.002)
"""
STOPPER = FORGER.split("            with open")[0] + FORGER.split("os.kill(int(name), signal.SIGKILL)\n")[1]


@root_only
@pytest.mark.parametrize("attack", ["forge", "stop"])
def test_a_daemon_can_neither_forge_nor_stall_the_evaluators_command(env, attack):
    env.reset(DONE)
    env.step("pyautogui.click(100, 100)")
    daemon = _daemon(env.local, FORGER if attack == "forge" else STOPPER)
    start = time.monotonic()
    assert env.evaluate() == 0.0  # the folder was never made: a 1.0 here would be forged
    assert time.monotonic() - start < 20 and env.last_eval_error is None
    assert psutil.Process(daemon).status() != psutil.STATUS_ZOMBIE  # the attack ran all along


@root_only
def test_the_agent_cannot_see_signal_or_trace_the_server_or_xvfb(local_desktop):
    d = LocalDesktop(screen=SCREEN)  # its own: the attack stops every process it may signal
    d.start()
    try:
        _cannot_reach_the_machinery(d)
    finally:
        d.stop()


def _cannot_reach_the_machinery(d: LocalDesktop) -> None:
    infra = d.request("GET", "/_verl_cua/health").json()["infra"]
    server, xvfb = infra["server"], infra["xvfb"]
    trace = f"import ctypes, sys; sys.exit(ctypes.CDLL(None).ptrace(16, {server}, 0, 0) != -1)"
    script = (
        f"ls /proc | grep -cx '{server}\\|{xvfb}'; kill -STOP {server} 2>/dev/null && echo STOPPED; "
        f"kill -9 {xvfb} 2>/dev/null && echo KILLED; pkill -x Xvfb; pkill -f desktop_server; "
        f'python3 -c "{trace}" || echo TRACED; kill -STOP -1 2>/dev/null; echo END'
    )
    # kill -1 stops every process the agent may signal: its own shell too, so the answer may never come
    with contextlib.suppress(Exception):
        assert _sh(d, script, timeout=5)["output"] == "0\nEND\n"
    for name in ("server", "xvfb"):
        assert psutil.Process(d.host_pid(infra[name])).status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE)
    assert d.request("GET", "/screenshot", timeout=10).status_code == 200


@root_only
def test_screenshots_and_the_evaluators_commands_work_while_the_agents_processes_are_saturated_or_frozen(env):
    env.reset(DONE)
    d = env.local
    _sh(d, "for i in 1 2 3 4 5 6 7 8; do setsid sh -c 'while :; do :; done' >/dev/null 2>&1 & done; echo")
    agent = d.identity.uid
    groups = {p.pid: Path(f"/proc/{p.pid}/cgroup").read_text() for p in psutil.process_iter() if p.uids().real == agent}
    server = d.host_pid(d.request("GET", "/_verl_cua/health").json()["pid"])
    assert all(Path(f"/proc/{server}/cgroup").read_text() != g for g in groups.values())  # cgroups of its own
    frozen = [pid for pid in groups if pid in set(d.pids())]
    for pid in frozen:  # the agent's whole side frozen: its session, its apps, its launcher, its busy loops
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        assert d.request("GET", "/screenshot", timeout=10).status_code == 200
        with d.evaluation():
            out = d.request("POST", "/execute", json={"command": "echo answered", "shell": True}, timeout=30).json()
            file = d.request("POST", "/file", data={"file_path": "/home/user/.bashrc"}, timeout=30)
        assert out["output"] == "answered\n" and time.monotonic() - start < 15, out
        assert file.status_code in (200, 404)  # the server read it, or it is not in the template: no hang
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


# -- 4. an agent-written file parsed on the host ------------------------------------------------------------------


def test_a_spreadsheet_of_millions_of_empty_cells_costs_the_host_a_bounded_child_and_scores_zero(env, monkeypatch):
    monkeypatch.setenv("VERL_CUA_METRIC_MEMORY", "1G")  # small, so the test is short; the default is 3 GiB
    env.reset(BOMB)
    env.step("pyautogui.click(100, 100)")
    # 8 million cells, 60 kB on disk (30 MB uncompressed: under the zip screen, so the child's limits decide)
    code = cell_bomb("/home/user/bomb.xlsx", 8000)
    written = env.local.request("POST", "/run_python", json={"code": code}, timeout=60)
    assert written.json()["output"] == "written\n"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    assert env.evaluate() == 0.0
    # the child ran out of its 1 GiB (upstream's metric swallows the MemoryError and scores 0 itself) or was killed
    assert time.monotonic() - start < 80 and "compare_table" in (env.last_eval_error or "compare_table")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 300 * 1024  # kB: the trainer kept its memory
    children = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
    assert not any(ENTRY in c for c in children), children  # the child was killed: nothing runs on


# -- 5. state that survives --------------------------------------------------------------------------------------
KEY = (
    "import ctypes; l = ctypes.CDLL(None, use_errno=True); "
    "print(l.syscall(248, b'user', b'verl-cua-mark', b'carried', 7, -4), ctypes.get_errno()); "
    "print(l.syscall(250, 5, -4, 0), ctypes.get_errno()); "  # KEYCTL_SETPERM(@u, 0): the clear at close would fail
    "print(l.syscall(304, -100, b'\\0' * 16, 0), ctypes.get_errno())"  # open_by_handle_at(AT_FDCWD, ...)
)


def test_a_desktop_can_make_no_kernel_key_nor_lock_its_keyring_nor_open_a_file_by_handle(env):
    env.reset(DONE)
    out = _sh(env.local, f"python3 -c {shlex.quote(KEY)}")["output"].split()
    assert out == ["-1", "38"] * 3, out  # ENOSYS, as the machinery's would be (the filter is the sandbox's)


def test_an_episode_of_api_calls_only_marks_its_env_used_and_the_next_reset_is_a_new_sandbox(local_desktop):
    env = make_env("osworld", provider="local", action_format="api_gui", pause=0.2, screen=SCREEN)
    try:
        env.reset(DONE)
        _sh(env.local, "touch /tmp/left-by-the-last-episode; echo")
        init = env.local.init.pid
        result = env.step("```python\nAgent.switch_window(title='no such window')\n```")
        assert result.info["action_valid"] and not result.info["infra_failure"], result.info
        env.reset(DONE)
        assert env.local.init.pid != init
        assert _sh(env.local, "ls /tmp/left-by-the-last-episode 2>/dev/null; echo")["output"] == "\n"
    finally:
        env.close()


# -- 6. a side channel on the host's files ------------------------------------------------------------------------
WATCH = """
import ctypes, select, sys
libc = ctypes.CDLL(None)
fd = libc.inotify_init1(0)
for path in sys.argv[1:]:
    assert libc.inotify_add_watch(fd, path.encode(), 0x1 | 0x20) > 0, path  # IN_ACCESS | IN_OPEN
print('watching', flush=True)
print('EVENT' if select.select([fd], [], [], 6)[0] else 'quiet', flush=True)
"""


@root_only
def test_an_inotify_watch_on_the_systems_files_sees_nothing_of_the_host(env):
    env.reset(DONE)
    watched = ["/etc/ld.so.cache", "/usr/bin/python3", "/etc/hosts"]
    result = {}
    reader = threading.Thread(target=lambda: result.update(_sh(env.local, f"python3 -c {shlex.quote(WATCH)} "
                                                                + " ".join(watched), timeout=20)))  # fmt: skip
    reader.start()
    time.sleep(2.0)  # the watch is set
    for path in watched:  # the host uses the same files (every process start reads the loader cache)
        Path(path).read_bytes()
    subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True)
    reader.join(30)
    assert result.get("output") == "watching\nquiet\n", result


# -- 7. the CDP pin wherever a local desktop runs -----------------------------------------------------------------
PIN_PROBE = """
import asyncio, http.server, json, threading
from verl_cua.envs.osworld.cdp_pin import CDPRedirectRefused
from verl_cua.envs.osworld.local_desktop import LocalDesktop
from verl_cua.envs.osworld.metric_child import ENTRY
from verl_cua.testing.bombs import cell_bomb

class Fake(http.server.BaseHTTPRequestHandler):  # a CDP endpoint that names another port (what an agent could run)
    def do_GET(self):
        body = json.dumps({"webSocketDebuggerUrl": "ws://127.0.0.1:1/devtools/browser/x"}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass

server = http.server.HTTPServer(("127.0.0.1", 0), Fake)
threading.Thread(target=server.serve_forever, daemon=True).start()
endpoint = f"http://127.0.0.1:{server.server_port}"
d = LocalDesktop(screen=(320, 240))
d.start()  # no OSWorldEnv, no evaluators.install(): only the desktop
d.stop()
from playwright.async_api import async_playwright
from playwright.sync_api import sync_playwright

async def connect():
    async with async_playwright() as p:
        try:
            await p.chromium.connect_over_cdp(endpoint, timeout=5000)
        except CDPRedirectRefused:
            return "refused"
        except Exception as exc:
            return type(exc).__name__
with sync_playwright() as p:
    try:
        p.chromium.connect_over_cdp(endpoint, timeout=5000)
        sync = "connected"
    except CDPRedirectRefused:
        sync = "refused"
    except Exception as exc:
        sync = type(exc).__name__
print(sync, asyncio.run(connect()))
"""


def test_a_process_with_only_a_local_desktop_pins_sync_and_async_cdp_connections(local_desktop):
    out = subprocess.run([sys.executable, "-c", PIN_PROBE], capture_output=True, text=True, timeout=180, cwd=REPO_ROOT)
    assert out.stdout.split() == ["refused", "refused"], out.stderr[-2000:]
