"""A clean-room server for OSWorld's VM HTTP protocol, run inside a local Xvfb desktop (no VM).

Written for verl-cua from the protocol OSWorld's client speaks (desktop_env.controllers); it shares no code
with OSWorld's in-VM server. It is copied into the desktop's runtime directory and run by the desktop's own
Python (Debian python3 + pyautogui), so it imports nothing from verl-cua. As root it runs under the desktop's
second uid (the machinery's, with CAP_DAC_READ_SEARCH only), which the agent's processes cannot see, signal or
trace; whatever must be the agent's own (its session, setup, its actions, the accessibility walk) it asks the
launcher (desktop_launcher.py, the agent's uid) to start. Rootless, both share one uid.

It runs inside the desktop's sandbox (its own PID, mount and network namespaces, see verl_cua's sandbox module).
It starts Xvfb (with an Xauthority cookie, unix socket only) from an execute-only copy (so it is not dumpable), has
the launcher start openbox and D-Bus the same way, declares itself the child subreaper, serves HTTP on a unix
socket the host relays, and refuses any request without the instance token (HTTP basic auth user,
`Authorization: Bearer`, or `X-Verl-Cua-Token`). The token is read from a pipe and kept in memory only; the process
is made non-dumpable so that the apps cannot read it from /proc or ptrace it (rootless: the same user). Its
listening sockets come from the host as file descriptors (no socket path exists inside). There is no in-place
revert: each episode gets a new sandbox, this server included. The commands it runs for setup and evaluation use
isolated Python (no cwd, script dir or user site on `sys.path`) from cwd `/`, so nothing the agent writes in HOME
answers an evaluator. Every call has a deadline; command output and fetched files are capped, and only regular
files are fetched.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import email.parser
import email.policy
import hmac
import io
import json
import os
import select
import shlex
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

try:  # inside the desktop: the files next to this one
    from desktop_launcher import LauncherClient, kill_tree, process_table
    from desktop_launcher import descendants as _descendants
    from desktop_setup import SetupTracker
except ImportError:  # imported as part of verl_cua (tests)
    from verl_cua.envs.osworld.desktop_launcher import LauncherClient, kill_tree, process_table
    from verl_cua.envs.osworld.desktop_launcher import descendants as _descendants
    from verl_cua.envs.osworld.desktop_setup import SetupTracker

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
EXEC_TIMEOUT = 120.0
EVALUATOR_TIMEOUT = 45.0  # one evaluator command: well under the env's evaluate_timeout (90 s) and the pool's (120 s)
PHASES = ("act", "evaluate")  # the host says when an evaluation begins and ends (the agent cannot: token)
ISOLATED_PYTHON = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"}  # the environment of every command run()s
MACHINERY_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "NO_AT_BRIDGE": "1"}  # the server's own commands read no ~ config
MACHINERY_UNSET = ("GTK_MODULES", "DBUS_SESSION_BUS_ADDRESS", "BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH")
FETCH_TIMEOUT = 60.0  # reading one file for an evaluator
OPEN_FILE_TIMEOUT = 60.0
TERMINAL_APPS = ("gnome-terminal", "xfce4-terminal", "mate-terminal", "tilix", "konsole", "terminator")
WINDOW_WAIT = 15.0  # activate_window: how long to wait for the window to appear
MAX_TIMEOUT = 600.0  # cap on any client-given timeout or wait
DRAIN_TIMEOUT = 5.0  # after killing a timed-out command: how long to wait for its pipes
A11Y_TIMEOUT = 20.0  # whole AT-SPI walk (accessibility tree, terminal text)
REQUEST_READ_TIMEOUT = 60.0  # a client that connects and stalls holds a thread no longer than this
MAX_BODY = 512 * 1024 * 1024
MAX_TREE_NODES = 20000  # list_directory answers at most this many entries


class Desktop:
    """The X display, window manager and app processes of one local desktop."""

    def __init__(self, args: argparse.Namespace, launcher: LauncherClient):
        self.launcher = launcher  # starts what runs as the agent's user (and in the agent's cgroup)
        self.phase = "act"
        self.display = args.display
        self.width, self.height = (int(v) for v in args.screen.split("x"))
        self.home = args.home
        self.template = args.template
        self.infra_dir = args.infra
        self.max_output = args.max_output_bytes
        self.dbus_config = args.dbus_config
        self.openbox = [os.path.join(args.infra, "openbox")]
        if args.openbox_config:
            self.openbox += ["--config-file", args.openbox_config]
        self.infra: dict[str, subprocess.Popen] = {}
        self.waiting: set[int] = set()  # pids a handler waits on (the reaper must not steal their status)
        self.spawn_lock = threading.Lock()  # spawn+register is atomic with respect to the reaper
        self.setup = SetupTracker()  # failed setup calls and launched apps since the last revert
        launcher.on_exit = self.setup.exited
        self.agent_pids: dict[str, int] = {}  # openbox, dbus: the agent's session, started by the launcher
        self.launcher_pid: int | None = None  # for the health report
        self.machinery_dir = "/tmp/.verl-cua-machinery"  # the server's own XDG dirs (made at start, 0700)

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start Xvfb and openbox and wait until the display answers."""
        os.makedirs(self.machinery_dir, mode=0o700, exist_ok=False)  # before any agent process: never the agent's
        auth = os.environ["XAUTHORITY"]
        xvfb = [os.path.join(self.infra_dir, "Xvfb"), self.display, "-screen", "0", f"{self.width}x{self.height}x24"]
        xvfb += ["-nolisten", "tcp", "-noreset"]
        # its abstract socket too (the network namespace is the desktop's own): libxcb tries that name first, so it
        # must be Xvfb's before any agent process exists, or an agent could bind it and answer the server's X clients
        self.start_dbus()  # needs no display: up while Xvfb starts
        xvfb += ["-auth", auth]
        self.infra["xvfb"] = self.spawn(xvfb, stdout=subprocess.DEVNULL)  # its stderr goes to server.log
        deadline = time.monotonic() + 20
        from Xlib import display as xdisplay
        from Xlib import error as xerror

        while True:  # a connection attempt is cheap: no helper process per poll
            try:
                conn = xdisplay.Display(self.display)
                break
            except (xerror.DisplayError, OSError):
                if self.infra["xvfb"].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Xvfb {self.display} did not start") from None
                time.sleep(0.005)
        self.agent_pids["openbox"] = self.launcher.spawn(self.openbox, shell=False, env=self.agent_env())
        try:
            _fix_keymap(conn)  # -noreset: the map holds after its last client leaves
        finally:
            conn.close()

    def start_dbus(self) -> None:
        """A fresh session bus (no service, name or activation environment of an earlier episode), for the apps."""
        # the bus listens at $XDG_RUNTIME_DIR/bus (made by the launcher), where OSWorld's tasks look for it
        read, write = os.pipe()
        daemon = [os.path.join(self.infra_dir, "dbus-daemon"), "--nofork", "--print-address=1"]
        command = [*daemon, f"--config-file={self.dbus_config}"]
        try:
            self.agent_pids["dbus"] = self.launcher.spawn(command, shell=False, env=self.agent_env(), stdout=write)
        finally:
            os.close(write)
        address = b""
        with os.fdopen(read, "rb") as pipe:
            while not address.endswith(b"\n") and select.select([pipe], [], [], 10)[0]:
                chunk = pipe.read1(4096)
                if not chunk:
                    break
                address += chunk
        if not address.strip():
            raise RuntimeError("the session bus did not start")
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = address.decode().strip()

    def spawn(self, command, *, shell: bool = False, quiet: bool = False, **kwargs) -> subprocess.Popen:
        """Popen registered with the reaper (so it never reaps a child somebody waits on)."""
        streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL} if quiet else {}
        with self.spawn_lock:
            proc = subprocess.Popen(command, shell=shell, **streams, **kwargs)
            self.waiting.add(proc.pid)
        return proc

    def output(self, argv: list[str], timeout: float = 10.0) -> str | None:
        """stdout of a short helper command (xdotool, wmctrl), or None when it fails."""
        result = self.run(argv, shell=False, timeout=timeout)
        return result["output"] if result["returncode"] == 0 else None

    def infra_status(self) -> dict[str, int | None]:
        """`{server, xvfb, openbox, dbus}` -> PID, None for a dead one."""
        status: dict[str, int | None] = {"server": os.getpid()}
        for name, proc in self.infra.items():
            status[name] = proc.pid if proc.poll() is None else None
        for name, pid in self.agent_pids.items():
            status[name] = pid if _alive(pid) else None
        status["launcher"] = None if self.launcher.gone else self.launcher_pid
        return status

    def machinery_env(self) -> dict[str, str]:
        """The environment of the server's own commands: isolated Python, no configuration from the agent's HOME
        (XDG dirs of its own, git's global config off, no GTK modules, not the agent's session bus); HOME stays
        the agent's, for the evaluator's `~`."""
        env = {**os.environ, **ISOLATED_PYTHON, **MACHINERY_ENV}
        for key in MACHINERY_UNSET:
            env.pop(key, None)
        for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
            env[key] = os.path.join(self.machinery_dir, key.split("_")[1].lower())
        return env

    def agent_env(self) -> dict[str, str]:
        """The environment of the agent's processes: the server's (the session bus included)."""
        return dict(os.environ)

    def as_agent(self) -> bool:
        """Whether a command route runs as the agent's user now: always before the evaluation begins (setup and the
        agent's actions are the agent's world); from then on the evaluator's commands run as the server's user."""
        return self.phase != "evaluate"

    def run_as_agent(self, command, *, shell: bool, timeout: float, cwd: str = "/", stdin: bytes | None = None) -> dict:
        """`run`, but started by the launcher as the agent's user; `stdin`: bytes fed to it."""
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        pipes = [os.pipe(), os.pipe()]
        feed = os.pipe() if stdin is not None else None
        env = {**self.agent_env(), **ISOLATED_PYTHON}
        try:
            pid = self.launcher.spawn(command, shell=shell, env=env, cwd=cwd, stdin=feed[0] if feed else None,
                                      stdout=pipes[0][1], stderr=pipes[1][1])  # fmt: skip
        except (RuntimeError, OSError, ValueError) as exc:
            for fd in [pipes[0][0], pipes[1][0], *([feed[1]] if feed else [])]:  # the rest: below, once each
                os.close(fd)
            return {"status": "error", "output": "", "error": f"not started: {exc}", "returncode": -1}
        finally:  # the child's ends: the launcher handed them on
            for fd in [pipes[0][1], pipes[1][1], *([feed[0]] if feed else [])]:
                os.close(fd)
        if feed:
            threading.Thread(target=_feed, args=(feed[1], stdin), daemon=True).start()
        streams = tuple(os.fdopen(read, "rb") for read, _ in pipes)

        def gone() -> str:
            return "the desktop's launcher is gone" if self.launcher.gone else ""

        return self._collect(streams, lambda s: self.launcher.wait(pid, s), lambda: self.launcher.kill(pid), timeout,
                             gone)  # fmt: skip

    def command(self, command, *, shell: bool, timeout: float, cwd: str = "/") -> dict:
        """A command route's command: the agent's before the evaluation, the evaluator's (bounded) during it."""
        if self.as_agent():
            return self.run_as_agent(command, shell=shell, timeout=timeout, cwd=cwd)
        return self.run(command, shell=shell, timeout=min(float(timeout), EVALUATOR_TIMEOUT), cwd=cwd)

    def reap(self) -> None:
        """Reap zombie children nobody waits on (apps killed, orphans handed to us as subreaper)."""
        me = os.getpid()
        with self.spawn_lock:
            for pid, (ppid, state) in process_table().items():
                if ppid != me or pid in self.waiting or state != "Z":
                    continue
                with contextlib.suppress(ChildProcessError):  # the setup's apps are the launcher's to reap
                    os.waitpid(pid, os.WNOHANG)

    def run(self, command, *, shell: bool, timeout: float, cwd: str = "/") -> dict:
        """Run a command to completion with a timeout; OSWorld's `{status, output, error, returncode}` reply.

        The evaluator's and setup's commands are the evaluator's: Python in them runs isolated (PYTHONSAFEPATH: no
        cwd or script dir on sys.path; no user site) and the cwd is outside HOME (`/` unless the caller names one),
        so a module the agent left in HOME (`~/pyautogui.py`) is never imported by them."""
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        proc = self.spawn(
            command, shell=shell, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env=self.machinery_env(),
        )  # fmt: skip
        waiter = threading.Thread(target=proc.wait, daemon=True)  # a blocking waitpid: no polling latency

        def wait(seconds: float) -> int | None:
            waiter.start()
            waiter.join(seconds)
            return None if waiter.is_alive() else proc.returncode

        def kill() -> None:
            kill_tree(proc.pid)
            waiter.join(DRAIN_TIMEOUT)

        try:
            return self._collect((proc.stdout, proc.stderr), wait, kill, timeout)
        finally:
            self.waiting.discard(proc.pid)

    def _collect(self, streams, wait, kill, timeout: float, gone=None) -> dict:
        """OSWorld's `{status, output, error, returncode}` reply of a started command: its stdout and stderr read
        (capped) while `wait(seconds)` gives its exit code, or None when it is still running (then `kill()`).
        `gone()`: why it could not be waited for, if not the timeout ("" for the timeout)."""
        timeout = min(float(timeout), MAX_TIMEOUT)
        out, err = bytearray(), bytearray()
        readers = [
            threading.Thread(target=_read_capped, args=(stream, buf, self.max_output), daemon=True)
            for stream, buf in zip(streams, (out, err), strict=True)
        ]
        for reader in readers:
            reader.start()
        code = wait(timeout)
        if code is None:
            kill()
        for reader in readers:  # a process that left the group may still hold the pipes: wait for them only so long
            reader.join(DRAIN_TIMEOUT)
        output, error = _capped_text(out, self.max_output), _capped_text(err, self.max_output)
        if code is None:
            why = (gone() if gone else "") or f"timed out after {timeout:g} s"
            return {"status": "error", "output": output, "error": why, "returncode": -1}
        return {"status": "success", "output": output, "error": error, "returncode": code}

    def launch(self, command, *, shell: bool) -> int:
        """Start a setup step's app in the background; it stays our descendant (and is killed on revert). Its exit
        status is kept for `settle` until the next revert."""
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        pid = self.launcher.spawn(command, shell=shell, env=self.agent_env(), cwd=self.home)
        self.setup.launch(pid, command)  # the launcher reaps it and tells the tracker its exit status
        return pid

    def a11y(self, mode: str):
        """The accessibility tree (`tree`) or a terminal's text (`terminal`), read by a fresh process: AT-SPI's
        connection, made once per process, would outlive the session bus that each revert replaces."""
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "desktop_a11y.py")
        # -I: no user site-packages, no PYTHON* variables: the agent can write HOME, and a module it plants there
        # must not forge the tree an evaluator reads
        # it runs as the agent's user: AT-SPI's buses admit their own user only
        argv = [sys.executable, "-I", script, mode, str(A11Y_TIMEOUT - 2)]
        result = self.run_as_agent(argv, shell=False, timeout=A11Y_TIMEOUT)
        if result["returncode"] == -1 and "timed out" in result["error"]:
            raise TimeoutError(f"the accessibility walk took over {A11Y_TIMEOUT:g} s")
        if result["returncode"] != 0:
            raise RuntimeError(f"the accessibility walk failed (exit {result['returncode']})")
        return json.loads(result["output"])

    def window_pids(self) -> set[int]:
        """PIDs owning a managed window that is not a splash screen (_NET_CLIENT_LIST, _NET_WM_PID)."""
        from Xlib import X
        from Xlib import display as xdisplay

        pids: set[int] = set()
        try:
            conn = xdisplay.Display(self.display)
        except Exception:
            return pids
        try:
            atom = conn.intern_atom
            root = conn.screen().root
            clients = root.get_full_property(atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
            splash = atom("_NET_WM_WINDOW_TYPE_SPLASH")
            for wid in clients.value if clients else []:
                try:
                    window = conn.create_resource_object("window", wid)
                    kind = window.get_full_property(atom("_NET_WM_WINDOW_TYPE"), X.AnyPropertyType)
                    pid = window.get_full_property(atom("_NET_WM_PID"), X.AnyPropertyType)
                except Exception:  # a window closing meanwhile
                    continue
                if pid and pid.value and not (kind and splash in kind.value):
                    pids.add(int(pid.value[0]))
        finally:
            conn.close()
        return pids

    # -- X queries ----------------------------------------------------------------------------------------------
    def screenshot(self) -> bytes:
        """PNG of the whole screen with the mouse pointer drawn in."""
        from PIL import ImageDraw, ImageGrab

        image = ImageGrab.grab(xdisplay=self.display)
        x, y = self.cursor()
        arrow = [
            (x, y),
            (x, y + 17),
            (x + 4, y + 13),
            (x + 7, y + 20),
            (x + 9, y + 19),
            (x + 6, y + 12),
            (x + 12, y + 12),
        ]
        draw = ImageDraw.Draw(image)
        draw.polygon(arrow, fill="white", outline="black")
        buf = io.BytesIO()
        image.save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def cursor(self) -> tuple[int, int]:
        """Pointer position on the root window."""
        out = self.output(["xdotool", "getmouselocation", "--shell"]) or ""
        fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        return int(fields.get("X", 0)), int(fields.get("Y", 0))

    def windows(self) -> list[tuple[str, str, str]]:
        """`(id, wm_class, title)` of every managed window (wmctrl)."""
        out = self.output(["wmctrl", "-lx"]) or ""
        rows = []
        for line in out.splitlines():
            parts = line.split(None, 4)
            if len(parts) >= 3:
                rows.append((parts[0], parts[2], parts[4] if len(parts) > 4 else ""))
        return rows

    def wait_window(self, name: str, *, strict: bool, by_class: bool, timeout: float) -> str | None:
        """`find_window`, polled until the window appears or `timeout` s have passed."""
        deadline = time.monotonic() + timeout
        while True:
            wid = self.find_window(name, strict=strict, by_class=by_class)
            if wid is not None or time.monotonic() > deadline:
                return wid
            time.sleep(0.2)

    def find_window(self, name: str, *, strict: bool, by_class: bool) -> str | None:
        """Window id whose title (or WM_CLASS) equals or contains `name`."""
        for wid, wm_class, title in self.windows():
            hay = wm_class if by_class else title
            if (hay == name) if strict else (name.lower() in hay.lower()):
                return wid
        return None


# -- process helpers ----------------------------------------------------------------------------------------------
def _terminal_running() -> bool:
    """Whether a terminal app that speaks AT-SPI runs (gnome-terminal-server, xfce4-terminal, tilix, konsole...)."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/comm") as f:
                    comm = f.read().strip().lower()
            except OSError:
                continue
            if any(t in comm for t in TERMINAL_APPS):
                return True
    return False


def _read_capped(stream, buf: bytearray, cap: int) -> None:
    """Read a pipe to its end, keeping its first `cap` (+1) bytes: an agent printing gigabytes costs no memory."""
    with stream:
        while chunk := stream.read1(1 << 16):
            if len(buf) <= cap:
                buf += chunk[: cap + 1 - len(buf)]


def _capped_text(buf: bytearray, cap: int) -> str:
    text = bytes(buf[:cap]).decode(errors="replace")
    return text + f"\n[output cut at {cap} bytes]" if len(buf) > cap else text


def _fix_keymap(conn) -> None:
    """Make every printable ASCII character reachable the way pyautogui types it (`conn`: a python-xlib Display).

    pyautogui presses the first keycode holding a character's keysym (lowest level, then lowest keycode) and adds
    Shift for its "shift characters". On Xvfb's default map `less` sits unshifted on the ISO key (94) and shifted
    on the comma key, so typing `<` gave `>`. Each such stray entry is removed until pyautogui's choice is right.
    """
    shifted = set('~!@#$%^&*()_+{}|:"<>?')
    first = conn.display.info.min_keycode
    table = [list(row) for row in conn.get_keyboard_mapping(first, conn.display.info.max_keycode - first + 1)]
    positions: dict[int, list[tuple[int, int]]] = {}  # printable keysym -> (level, row) of each place it sits
    for i, row in enumerate(table):
        for level, sym in enumerate(row[:2]):
            if 0x21 <= sym < 0x7F:
                positions.setdefault(sym, []).append((level, i))
    changed = False
    for code, hits in positions.items():
        char = chr(code)
        need = 1 if char.isupper() or char in shifted else 0
        hits.sort()
        while len(hits) > 1 and hits[0][0] != need and any(level == need for level, _ in hits):
            level, i = hits.pop(0)
            table[i][level] = 0
            changed = True
    if changed:
        conn.change_keyboard_mapping(first, table)
        conn.sync()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _feed(fd: int, data: bytes) -> None:
    """Write `data` to a pipe, then close it (a child that stops reading loses the rest)."""
    with contextlib.suppress(OSError), os.fdopen(fd, "wb") as pipe:
        pipe.write(data)


def _tree(path: str, depth: int = 0, budget: list[int] | None = None) -> dict:
    """OSWorld's directory tree, at most 32 levels and MAX_TREE_NODES entries (a huge tree is cut, not sent)."""
    budget = [MAX_TREE_NODES] if budget is None else budget
    budget[0] -= 1
    node = {"name": os.path.basename(path) or path, "type": "directory" if os.path.isdir(path) else "file"}
    if node["type"] == "directory" and depth < 32:
        names = sorted(os.listdir(path))[: max(budget[0], 0)]
        node["children"] = [_tree(os.path.join(path, n), depth + 1, budget) for n in names if budget[0] > 0]
    return node


# -- HTTP -------------------------------------------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    """Routes OSWorld's endpoints; every request must carry the instance token."""

    server_version = "verl-cua-desktop/1"
    timeout = REQUEST_READ_TIMEOUT  # socket timeout: a stalled client cannot hold a thread for ever
    desktop: Desktop
    token: str
    max_file: int

    def address_string(self):  # a unix-socket peer has no address
        return "relay"

    def log_message(self, format, *args):  # noqa: A002 - quiet; errors are returned to the client
        pass

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        given = self.headers.get("X-Verl-Cua-Token", "")
        if header.startswith("Bearer "):
            given = header[7:]
        elif header.startswith("Basic "):
            try:
                given = base64.b64decode(header[6:]).decode().split(":", 1)[0]
            except ValueError:
                given = ""
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError(f"request body over {MAX_BODY} bytes")
        return self.rfile.read(length) if length else b""

    def _params(self, body: bytes) -> dict:
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("multipart/form-data"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body
            )
            out = {}
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True)
                out[name] = payload if part.get_filename() else payload.decode()
            return out
        if ctype.startswith("application/x-www-form-urlencoded"):
            return {k: v[0] for k, v in parse_qs(body.decode()).items()}
        return json.loads(body) if body.strip() else {}

    def _send(self, status: int, payload, ctype: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self, method: str) -> None:
        if not self._authorized():
            self._send(HTTPStatus.UNAUTHORIZED, {"status": "error", "error": "missing or wrong token"})
            return
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        route = ROUTES.get((method, path))
        if route is None:
            self._send(HTTPStatus.NOT_FOUND, {"status": "error", "error": f"no endpoint {method} {path}"})
            return
        try:
            params = self._params(self._body()) if method == "POST" else {}
            status, payload, *ctype = route(self, params)
        except Exception as exc:  # a bad request or a failed call: reported to the client, the server lives on
            status, payload, ctype = 500, {"status": "error", "error": f"{type(exc).__name__}: {exc}"}, []
        if path.startswith("/setup/") and status >= 400:  # OSWorld's setup only logs it: the reset must fail
            error = payload.get("error", "") if isinstance(payload, dict) else ""
            self.desktop.setup.failed(f"{path.removeprefix('/setup/')}: {error or f'HTTP {status}'}")
        self._send(status, payload, *ctype)

    def do_GET(self):  # noqa: N802 - http.server naming
        self._dispatch("GET")

    def do_POST(self):  # noqa: N802 - http.server naming
        self._dispatch("POST")

    # -- endpoints ------------------------------------------------------------------------------------------------
    def screenshot(self, _):
        return 200, self.desktop.screenshot(), "image/png"

    def execute(self, p):
        if self.path.startswith("/setup/"):  # setup and postconfig build the agent's world: as its user
            result = self.desktop.run_as_agent(p["command"], shell=bool(p.get("shell")), timeout=EXEC_TIMEOUT)
            self.desktop.setup.executed(p["command"], result)
            return 200, result
        return 200, self.desktop.command(p["command"], shell=bool(p.get("shell")), timeout=EXEC_TIMEOUT)

    def execute_with_verification(self, p):
        result = self.desktop.run_as_agent(p["command"], shell=bool(p.get("shell")), timeout=EXEC_TIMEOUT)
        check = p.get("verification") or {}
        deadline = time.monotonic() + min(float(p.get("max_wait_time", 10)), MAX_TIMEOUT)
        interval = min(max(float(p.get("check_interval", 1.0)), 0.05), 10.0)
        while time.monotonic() < deadline:
            ok = True
            if check.get("window_exists"):
                ok = self.desktop.find_window(check["window_exists"], strict=False, by_class=False) is not None
            if ok and check.get("command_success"):
                ok = self.desktop.run_as_agent(check["command_success"], shell=True, timeout=30)["returncode"] == 0
            if ok:
                return 200, {**result, "verification": "passed"}
            time.sleep(interval)
        return 500, {**result, "status": "error", "error": "verification did not pass in time"}

    def run_python(self, p):
        # the code goes in argv: a script file would sit where the agent can write (and swap it before it runs)
        result = self.desktop.command([sys.executable, "-c", p["code"]], shell=False, timeout=EXEC_TIMEOUT)
        result["message"] = "ok" if result["returncode"] == 0 else "failed"
        return 200, result

    def run_bash_script(self, p):
        timeout = float(p.get("timeout") or 30)
        cwd = p.get("working_dir") or "/"
        return 200, self.desktop.command(["bash", "-c", p["script"]], shell=False, timeout=timeout, cwd=cwd)

    def terminal(self, _):
        if not _terminal_running():  # OSWorld's setup pings this at every reset: no AT-SPI walk without a terminal
            return 200, {"output": None}
        return 200, {"output": self.desktop.a11y("terminal")}

    def accessibility(self, _):
        return 200, {"AT": self.desktop.a11y("tree")}

    def screen_size(self, _):
        return 200, {"width": self.desktop.width, "height": self.desktop.height}

    def window_size(self, p):
        wid = self.desktop.find_window(p.get("app_class_name", ""), strict=False, by_class=True)
        if wid is None:
            return 404, {"status": "error", "error": "no such window"}
        out = self.desktop.output(["xdotool", "getwindowgeometry", "--shell", str(int(wid, 16))]) or ""
        fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        return 200, {"width": int(fields.get("WIDTH", 0)), "height": int(fields.get("HEIGHT", 0))}

    def desktop_path(self, _):
        return 200, {"desktop_path": os.path.join(self.desktop.home, "Desktop")}

    def platform(self, _):
        return 200, b"Linux", "text/plain"

    def cursor_position(self, _):
        return 200, list(self.desktop.cursor())

    def list_directory(self, p):
        path = os.path.expanduser(p["path"])
        if not os.path.isdir(path):
            return 404, {"status": "error", "error": f"not a directory: {path}"}
        return 200, {"directory_tree": _tree(path)}

    def file(self, p):
        path = os.path.expanduser(p.get("file_path", ""))
        try:  # O_NONBLOCK: a FIFO or device in its place (swapped in at any moment) never blocks the open
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return 404, {"status": "error", "error": f"no such file: {path}"}
        with os.fdopen(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return 404, {"status": "error", "error": f"not a regular file: {path}"}
            cap = self.max_file
            too_big = {"status": "error", "error": f"file over the {cap}-byte cap of the local desktop: {path}"}
            if st.st_size > cap:  # a sparse file counts at its apparent size
                return 413, too_big
            data, deadline = bytearray(), time.monotonic() + FETCH_TIMEOUT
            while len(data) <= cap and (chunk := f.read(1 << 20)):
                data += chunk
                if time.monotonic() > deadline:
                    return 504, {"status": "error", "error": f"reading {path} took over {FETCH_TIMEOUT:g} s"}
        return (413, too_big) if len(data) > cap else (200, bytes(data), "application/octet-stream")

    def upload(self, p):
        path = os.path.expanduser(p["file_path"])
        data = p["file_data"]
        return self._write_as_agent(path, data if isinstance(data, bytes) else data.encode())

    def download_file(self, p):
        path = os.path.expanduser(p["path"])
        deadline, data = time.monotonic() + MAX_TIMEOUT, bytearray()
        with urllib.request.urlopen(p["url"], timeout=60) as response:  # noqa: S310
            while chunk := response.read(1 << 20):
                data += chunk
                if len(data) > MAX_BODY:
                    raise ValueError(f"download over {MAX_BODY} bytes")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"download took over {MAX_TIMEOUT:g} s")
        return self._write_as_agent(path, bytes(data))

    def _write_as_agent(self, path: str, data: bytes):
        """A setup file written by the agent's user (it is the agent's to edit), its folders made as needed."""
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        result = self.desktop.run_as_agent(["/bin/sh", "-c", script, "sh", path], shell=False,
                                           timeout=MAX_TIMEOUT, stdin=data)  # fmt: skip
        if result["returncode"] != 0:
            return 500, {"status": "error", "error": f"cannot write {path}: {result['error'].strip()[:300]}"}
        return 200, {"status": "success", "path": path}

    def open_file(self, p):
        path = os.path.expanduser(p["path"])
        if not os.path.exists(path):
            return 404, {"status": "error", "error": f"no such file: {path}"}
        self.desktop.launch(["xdg-open", path], shell=False)
        stem = os.path.splitext(os.path.basename(path))[0]
        timeout = min(float(p.get("timeout", OPEN_FILE_TIMEOUT)), MAX_TIMEOUT)
        if self.desktop.wait_window(stem, strict=False, by_class=False, timeout=timeout):
            return 200, {"status": "success", "path": path}
        return 500, {"status": "error", "error": f"no window for {os.path.basename(path)} after the timeout"}

    def launch(self, p):
        pid = self.desktop.launch(p["command"], shell=bool(p.get("shell")))
        return 200, {"status": "success", "pid": pid}

    def activate_window(self, p):
        # the window of an app a step before just launched may be on its way
        strict, by_class = bool(p.get("strict")), bool(p.get("by_class"))
        wid = self.desktop.wait_window(p["window_name"], strict=strict, by_class=by_class, timeout=WINDOW_WAIT)
        if wid is None:
            return 404, {"status": "error", "error": f"no window {p['window_name']!r}"}
        self.desktop.output(["wmctrl", "-i", "-a", wid])
        return 200, {"status": "success"}

    def close_window(self, p):
        wid = self.desktop.find_window(p["window_name"], strict=bool(p.get("strict")), by_class=bool(p.get("by_class")))
        if wid is None:
            return 404, {"status": "error", "error": f"no window {p['window_name']!r}"}
        self.desktop.output(["wmctrl", "-i", "-c", wid])
        return 200, {"status": "success"}

    def unsupported(self, _):
        return 501, {"status": "error", "error": "not available on the local desktop (no GNOME, no recorder)"}

    def begin_setup(self, _):
        self.desktop.setup.clear()  # a reset whose setup raised before settling leaves its failures behind
        return 200, {"status": "success"}

    def settle(self, p):
        timeout = min(max(float(p.get("timeout", 30)), 0.0), MAX_TIMEOUT)
        setup = self.desktop.setup
        return 200, setup.settle(self.desktop.window_pids, _descendants, self.desktop.launcher.maps_x, timeout)

    def phase(self, p):
        phase = p.get("phase")
        if phase not in PHASES:
            return 400, {"status": "error", "error": f"unknown phase {phase!r}; valid: {', '.join(PHASES)}"}
        self.desktop.phase = phase
        return 200, {"status": "success", "phase": phase}

    def health(self, _):
        return 200, {"status": "success", "pid": os.getpid(), "infra": self.desktop.infra_status()}


ROUTES = {
    ("GET", "/screenshot"): Handler.screenshot,
    ("POST", "/execute"): Handler.execute,
    ("POST", "/setup/execute"): Handler.execute,
    ("POST", "/setup/execute_with_verification"): Handler.execute_with_verification,
    ("POST", "/run_python"): Handler.run_python,
    ("POST", "/run_bash_script"): Handler.run_bash_script,
    ("GET", "/terminal"): Handler.terminal,
    ("GET", "/accessibility"): Handler.accessibility,
    ("POST", "/screen_size"): Handler.screen_size,
    ("POST", "/window_size"): Handler.window_size,
    ("POST", "/desktop_path"): Handler.desktop_path,
    ("GET", "/platform"): Handler.platform,
    ("GET", "/cursor_position"): Handler.cursor_position,
    ("POST", "/list_directory"): Handler.list_directory,
    ("POST", "/file"): Handler.file,
    ("POST", "/setup/upload"): Handler.upload,
    ("POST", "/setup/download_file"): Handler.download_file,
    ("POST", "/setup/open_file"): Handler.open_file,
    ("POST", "/setup/launch"): Handler.launch,
    ("POST", "/setup/activate_window"): Handler.activate_window,
    ("POST", "/setup/close_window"): Handler.close_window,
    ("POST", "/wallpaper"): Handler.unsupported,
    ("POST", "/setup/change_wallpaper"): Handler.unsupported,
    ("POST", "/start_recording"): Handler.unsupported,
    ("POST", "/end_recording"): Handler.unsupported,
    ("GET", "/_verl_cua/health"): Handler.health,
    ("POST", "/_verl_cua/begin_setup"): Handler.begin_setup,
    ("POST", "/_verl_cua/settle"): Handler.settle,
    ("POST", "/_verl_cua/phase"): Handler.phase,
}


class UnixHTTPServer(ThreadingHTTPServer):
    """The HTTP server on the unix socket the host made and handed over as a file descriptor (the host relays TCP
    to it; the desktop's network has no way out)."""

    address_family = socket.AF_UNIX
    daemon_threads = True

    def __init__(self, listener: socket.socket, handler):
        super().__init__("", handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listener
        self.server_name, self.server_port = "localhost", 0

    def handle_error(self, request, client_address):
        """A client that hung up costs nothing; any other error one line (never a traceback per request)."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            print(f"request failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr, flush=True)


def forward(listener: socket.socket, connect) -> None:
    """Pipe every connection accepted on `listener` to a fresh `connect()` socket, both ways (daemon threads)."""

    def serve():
        while True:
            client, _ = listener.accept()
            try:
                upstream = connect()
            except OSError:
                client.close()
                continue
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(src, dst), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def _loopback_connection(port: int) -> socket.socket:
    upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
    upstream.settimeout(None)
    return upstream


def _unix_connection(path: str) -> socket.socket:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        upstream.close()
        raise
    return upstream


def _pipe(src, dst) -> None:
    """Copy src to dst until src ends, then shut both down."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main() -> None:
    """Serve until SIGTERM; the token comes through --token-fd (never argv, environment or a file)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket-fd", type=int, required=True, help="listening unix socket to serve HTTP on")
    parser.add_argument("--cdp-socket-fd", type=int, default=-1, help="listening unix socket relayed to --cdp-port")
    parser.add_argument("--cdp-port", type=int, default=9222)
    parser.add_argument("--token-fd", type=int, required=True)
    parser.add_argument("--display", required=True)
    parser.add_argument("--screen", default="1920x1080")
    parser.add_argument("--home", required=True)
    parser.add_argument("--template", default="", help="(the launcher populates HOME from it)")
    parser.add_argument("--infra", required=True, help="dir of the execute-only Xvfb, openbox and dbus-daemon")
    parser.add_argument("--dbus-config", required=True, help="the session bus configuration")
    parser.add_argument("--openbox-config", default="", help="openbox's rc.xml (read-only for the apps)")
    parser.add_argument("--proxy-socket", default="", help="the host's web proxy (egress on): served at --proxy-port")
    parser.add_argument("--proxy-port", type=int, default=3128)
    parser.add_argument("--max-file-bytes", type=int, default=64 << 20)
    parser.add_argument("--max-output-bytes", type=int, default=1 << 20)
    parser.add_argument("--launcher-fd", type=int, required=True, help="socket pair to the agent's launcher")
    parser.add_argument("--launcher-pid", type=int, default=0, help="the launcher's pid (for the health report)")
    args = parser.parse_args()

    libc = ctypes.CDLL(None, use_errno=True)
    # non-dumpable before the token is read: the apps run as our user, and must not ptrace us or read our memory
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 or libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl failed: {os.strerror(ctypes.get_errno())}")
    with os.fdopen(args.token_fd, "rb") as pipe:
        token = pipe.read(256).decode().strip()
    if len(token) < 16:
        sys.exit("no token on --token-fd")
    os.umask(0o077)
    if args.proxy_socket:  # the apps reach the web only through the host's proxy, which refuses non-public addresses
        forward(socket.create_server(("127.0.0.1", args.proxy_port)), lambda: _unix_connection(args.proxy_socket))
        proxy = f"http://127.0.0.1:{args.proxy_port}"
        for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "VERL_CUA_PROXY"):
            os.environ[var] = proxy
        os.environ["no_proxy"] = os.environ["NO_PROXY"] = "localhost,127.0.0.1,::1"
    launcher = LauncherClient(socket.socket(fileno=args.launcher_fd))
    launcher.start()
    desktop = Desktop(args, launcher)
    desktop.launcher_pid = args.launcher_pid or None
    desktop.start()

    Handler.desktop, Handler.token, Handler.max_file = desktop, token, args.max_file_bytes
    server = UnixHTTPServer(socket.socket(fileno=args.socket_fd), Handler)
    if args.cdp_socket_fd >= 0:
        # Chromium's CDP listens on the sandbox's 127.0.0.1 only: the host reaches it through this socket
        forward(socket.socket(fileno=args.cdp_socket_fd), lambda: _loopback_connection(args.cdp_port))

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def reaper():
        while True:
            desktop.reap()
            time.sleep(1.0)

    threading.Thread(target=reaper, daemon=True).start()
    print("ready", flush=True)
    server.serve_forever(poll_interval=0.2)
    # leaving ends the namespace's init (bubblewrap's, whose child we are): the kernel kills whatever is left


if __name__ == "__main__":
    main()
