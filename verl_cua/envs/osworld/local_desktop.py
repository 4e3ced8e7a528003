"""Launch one local desktop (Xvfb + openbox + D-Bus + our OSWorld-protocol server) in a sandbox, no VM.

The desktop runs as an unprivileged user (created on first use when we are root) in its own mount namespace in
which the project tree and the launching user's HOME are hidden under empty, unreadable tmpfs mounts; it has its
own HOME (restored from a template on every revert), X display with an Xauthority cookie, and an HTTP server
bound to 127.0.0.1 that refuses requests without this instance's token. Not root: the desktop runs as the
current user in a user+mount namespace (`unshare --user --map-current-user --mount`) with the same hiding.
"""

from __future__ import annotations

import fcntl
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

logger = logging.getLogger(__name__)

SETUP_HINT = "bash envs/local_desktop/setup.sh"
DESKTOP_USER = os.environ.get("VERL_CUA_DESKTOP_USER", "verl-cua-desktop")
DESKTOP_VENV = os.environ.get("VERL_CUA_DESKTOP_VENV", "/opt/verl-cua/desktop-venv")
# outside /tmp: each desktop gets a private, empty /tmp of its own (a tmpfs in its mount namespace)
RUNTIME_ROOT = Path(os.environ.get("VERL_CUA_DESKTOP_RUNTIME", "/var/tmp/verl-cua-desktop"))
REPO_ROOT = Path(__file__).resolve().parents[3]
HOME_TEMPLATE = REPO_ROOT / "envs" / "local_desktop" / "home"
SERVER_FILES = ("desktop_server.py", "desktop_a11y.py")
REQUIRED_BINARIES = {  # binary -> Debian package
    "Xvfb": "xvfb",
    "xauth": "xauth",
    "openbox": "openbox",
    "dbus-run-session": "dbus",
    "xdotool": "xdotool",
    "wmctrl": "wmctrl",
    "xdpyinfo": "x11-utils",
    "unshare": "util-linux",
}
FIRST_DISPLAY = 100
BROWSERS = ("chromium", "google-chrome", "chromium-browser")
BROWSER_WRAPPER = """#!/bin/sh
# Debian chromium with this desktop's CDP port (OSWorld's Chrome getters connect to it over CDP).
args=""
for a in "$@"; do case "$a" in --remote-debugging-port=*|--remote-debugging-address=*) ;; *) args="$args
$a" ;; esac; done
IFS='
'
exec /usr/bin/chromium --remote-debugging-port="$VERL_CUA_CDP_PORT" --remote-debugging-address=127.0.0.1 \\
    --no-first-run --no-default-browser-check --disable-gpu --no-sandbox --password-store=basic \\
    --disable-dev-shm-usage --user-data-dir="$HOME/.config/chromium" $args
"""


class DesktopStartError(RuntimeError):
    """The local desktop did not come up (missing packages are named with the apt command)."""


def check_system() -> None:
    """One-line error naming the setup command when a system package or the desktop Python is missing."""
    missing = [b for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if missing:
        packages = " ".join(sorted({REQUIRED_BINARIES[b] for b in missing}))
        raise DesktopStartError(
            f"the local desktop needs {', '.join(missing)}: apt-get install -y --no-install-recommends {packages} "
            f"(or run {SETUP_HINT} as root for everything it uses)"
        )
    if not os.access(f"{DESKTOP_VENV}/bin/python", os.X_OK):
        raise DesktopStartError(f"the local desktop needs its Python at {DESKTOP_VENV}: run {SETUP_HINT}")


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class _Netrc:
    """Per-desktop tokens for OSWorld's client, which builds `http://{vm_ip}:{port}` URLs and has no auth knob.

    Each desktop has its own loopback address (127.77.x.y); requests reads the token for that host from the
    netrc file `$NETRC` points to (requests' documented netrc support), so every client call is authenticated.
    A netrc the user already had is kept in the file.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[str, str] = {}
        self._path: Path | None = None
        self._base = ""

    def add(self, host: str, token: str) -> None:
        with self._lock:
            if self._path is None:
                previous = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
                self._base = Path(previous).read_text() if os.path.isfile(previous) else ""
                self._path = Path(tempfile.mkdtemp(prefix="verl-cua-netrc-")) / "netrc"
                os.environ["NETRC"] = str(self._path)
            self._entries[host] = token
            self._write()

    def remove(self, host: str, token: str) -> None:
        """Drop `host`'s entry if it is still `token`'s (a new desktop may have the host by now)."""
        with self._lock:
            if self._entries.get(host) == token:
                del self._entries[host]
                self._write()

    def ensure(self) -> None:
        """Point $NETRC at our file again if something replaced it."""
        with self._lock:
            if self._path is not None and os.environ.get("NETRC") != str(self._path):
                os.environ["NETRC"] = str(self._path)

    def _write(self) -> None:
        lines = [f"machine {h} login {t} password x" for h, t in self._entries.items()]
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(self._base + "\n" + "\n".join(lines) + "\n")
        tmp.chmod(0o600)
        tmp.replace(self._path)


NETRC = _Netrc()


def _desktop_user() -> tuple[int, int]:
    """UID/GID the desktop runs as: a dedicated system user when root (created once), else ourselves."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    try:
        entry = pwd.getpwnam(DESKTOP_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
             DESKTOP_USER],
            check=True, capture_output=True,
        )  # fmt: skip
        entry = pwd.getpwnam(DESKTOP_USER)
    return entry.pw_uid, entry.pw_gid


def hidden_paths() -> list[str]:
    """Paths the desktop must not see: the project tree, the launching user's HOME, the working directory."""
    paths = {str(REPO_ROOT), os.path.realpath(os.getcwd()), os.path.realpath(os.path.expanduser("~"))}
    paths.discard("/")
    safe = {RUNTIME_ROOT.resolve(), Path(DESKTOP_VENV).resolve()}
    out = []
    for p in sorted(paths):
        path = Path(p)
        if not path.is_dir() or any(s == path or path in s.parents for s in safe):
            continue  # never hide what the desktop itself needs
        if path == Path("/tmp") or Path("/tmp") in path.parents:
            continue  # the desktop's /tmp is a private, empty tmpfs already
        out.append(p)
    return out


class LocalDesktop:
    """One sandboxed desktop process tree; `address` is what OSWorld's provider interface returns."""

    def __init__(self, *, screen: tuple[int, int] = (1920, 1080), start_timeout: float = 60.0):
        check_system()
        self.screen = screen
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.runtime: Path | None = None
        self._display_lock = None
        self.display = self.port = self.cdp_port = None
        self.host = "127.0.0.1"
        self.token = ""

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Boot Xvfb, openbox, D-Bus and the server; return when the first screenshot is served."""
        self.stop()
        uid, gid = _desktop_user()
        self._allocate_display()
        self.host = f"127.77.{self.display // 256}.{self.display % 256}"
        self.port, self.cdp_port, self._cdp_internal = _free_port(self.host), _free_port(self.host), _free_port()
        self.token = secrets.token_hex(16)
        NETRC.add(self.host, self.token)
        RUNTIME_ROOT.mkdir(parents=True, exist_ok=True)
        RUNTIME_ROOT.chmod(0o711)
        runtime = Path(tempfile.mkdtemp(prefix=f"d{self.display}-", dir=RUNTIME_ROOT))
        self.runtime = runtime
        self._prepare_runtime(runtime)
        for path in [runtime, *runtime.rglob("*")]:
            os.lchown(path, uid, gid)
        argv = [*self._sandbox_prefix(uid, gid), "/usr/bin/env", "-i", *self._environment(runtime)]
        argv += ["dbus-run-session", "--", f"{DESKTOP_VENV}/bin/python", str(runtime / "server" / "desktop_server.py")]
        argv += [
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--cdp-port",
            str(self.cdp_port),
            "--token-file",
            str(runtime / "token"),
            "--display",
            f":{self.display}",
        ]
        argv += ["--screen", f"{self.screen[0]}x{self.screen[1]}", "--home", str(runtime / "home")]
        argv += ["--template", str(runtime / "home_template")]
        log = open(runtime / "server.log", "wb")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        self._wait_ready()

    def revert(self) -> None:
        """Kill every app and restore HOME (server-side); if the server does not answer, restart the desktop."""
        try:
            response = self.request("POST", "/_verl_cua/revert", timeout=30)
            response.raise_for_status()
            if response.json().get("left"):
                raise RuntimeError(f"processes survived the revert: {response.json()['left']}")
        except Exception as exc:
            logger.warning("local desktop :%s revert failed (%s); restarting it", self.display, exc)
            self.start()

    def stop(self) -> None:
        """Kill the whole desktop tree by PID and remove its runtime directory."""
        if self.proc is not None:
            pids = self.pids()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in pids:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                try:
                    self.proc.wait(timeout=3)
                    break
                except subprocess.TimeoutExpired:
                    continue
            _wait_gone(pids, 5.0)
            self.proc = None
        if self.token:
            NETRC.remove(self.host, self.token)
            self.token = ""
        if self.runtime is not None:
            shutil.rmtree(self.runtime, ignore_errors=True)
            self.runtime = None
        if self._display_lock is not None:
            self._display_lock.close()
            self._display_lock = None

    # -- queries ------------------------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        """`ip:server:cdp:vnc:vlc`, the form OSWorld's DesktopEnv splits on ':' (the token comes from netrc)."""
        return f"{self.host}:{self.port}:{self.cdp_port}:0:0"

    @property
    def url(self) -> str:
        """Base URL of the server (token not included)."""
        return f"http://{self.host}:{self.port}"

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        """An authenticated request to this desktop's server."""
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        return requests.request(method, self.url + path, headers=headers, **kwargs)

    def alive(self) -> bool:
        """Whether the sandbox process is still running (cheap; no request)."""
        return self.proc is not None and self.proc.poll() is None

    def healthy(self) -> bool:
        """Whether the server answers and Xvfb runs."""
        if not self.alive():
            return False
        try:
            response = self.request("GET", "/_verl_cua/health", timeout=5)
            return response.status_code == 200 and len(response.json().get("infra", [])) >= 2
        except (requests.RequestException, ValueError):
            return False

    def pids(self) -> list[int]:
        """The sandbox process and every descendant (Xvfb, server, apps)."""
        if self.proc is None:
            return []
        import psutil

        try:
            root = psutil.Process(self.proc.pid)
            return [root.pid] + [p.pid for p in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    # -- internals ------------------------------------------------------------------------------------------------
    def _allocate_display(self) -> None:
        RUNTIME_ROOT.mkdir(parents=True, exist_ok=True)
        for n in range(FIRST_DISPLAY, FIRST_DISPLAY + 1000):
            if _x_display_taken(n):
                continue
            lock = open(RUNTIME_ROOT / f"display-{n}.lock", "w")  # noqa: SIM115 - held for the desktop's life
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            self.display, self._display_lock = n, lock
            return
        raise DesktopStartError("no free X display number in :100-:1099")

    def _prepare_runtime(self, runtime: Path) -> None:
        (runtime / "server").mkdir()
        for name in SERVER_FILES:
            shutil.copy2(Path(__file__).with_name(name), runtime / "server" / name)
        shutil.copytree(HOME_TEMPLATE, runtime / "home_template", symlinks=True)
        (runtime / "home").mkdir()
        (runtime / "bin").mkdir()
        for name in BROWSERS:
            wrapper = runtime / "bin" / name
            wrapper.write_text(BROWSER_WRAPPER)
            wrapper.chmod(0o755)
        for name in ("xdg",):
            (runtime / name).mkdir(mode=0o700)
        token_file = runtime / "token"
        token_file.write_text(self.token)
        token_file.chmod(0o600)
        cookie = secrets.token_hex(16)
        subprocess.run(
            ["xauth", "-f", str(runtime / "Xauthority"), "add", f":{self.display}", ".", cookie],
            check=True, capture_output=True,
        )  # fmt: skip

    def _environment(self, runtime: Path) -> list[str]:
        env = {
            "DISPLAY": f":{self.display}",
            "XAUTHORITY": str(runtime / "Xauthority"),
            "HOME": str(runtime / "home"),
            "USER": DESKTOP_USER,
            "PATH": f"{runtime / 'bin'}:{DESKTOP_VENV}/bin:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "XDG_SESSION_TYPE": "x11",
            "XDG_RUNTIME_DIR": str(runtime / "xdg"),
            "TMPDIR": "/tmp",
            "GTK_MODULES": "gail:atk-bridge",
            "SAL_USE_VCLPLUGIN": "gtk3",
            "NO_AT_BRIDGE": "0",
            "VERL_CUA_CDP_PORT": str(self._cdp_internal),
        }
        return [f"{k}={v}" for k, v in env.items()]

    def _sandbox_prefix(self, uid: int, gid: int) -> list[str]:
        """unshare a mount namespace, give it a private /tmp, hide `hidden_paths()`, drop to the desktop user."""
        hide = (
            "mount -t tmpfs -o mode=1777,size=2g verl-cua-tmp /tmp || exit 97; "
            'while [ "$1" != -- ]; do mount -t tmpfs -o ro,mode=000,size=4k verl-cua-hidden "$1" || exit 97; shift; '
            'done; shift; exec "$@"'
        )
        if os.geteuid() == 0:
            drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs"]
            return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", hide, "sh",
                    *hidden_paths(), "--", *drop]  # fmt: skip
        return ["unshare", "--user", "--map-current-user", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                hide, "sh", *hidden_paths(), "--"]  # fmt: skip

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                response = self.request("GET", "/screenshot", timeout=5)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}"
            except requests.RequestException as exc:
                last = type(exc).__name__
            time.sleep(0.1)
        log = ""
        if self.runtime is not None and (self.runtime / "server.log").exists():
            log = (self.runtime / "server.log").read_text(errors="replace").strip().splitlines()[-1:]
            log = f"; server log: {log[0][:300]}" if log else ""
        rc = self.proc.poll()
        self.stop()
        raise DesktopStartError(f"local desktop did not start ({last}, exit {rc}){log}")

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


def _x_display_taken(n: int) -> bool:
    """Whether an X server holds display :n (a lock file whose process is gone is stale and removed)."""
    lock = Path(f"/tmp/.X{n}-lock")
    try:
        pid = int(lock.read_text().strip())
    except (OSError, ValueError):
        return Path(f"/tmp/.X11-unix/X{n}").exists()
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        for stale in (lock, Path(f"/tmp/.X11-unix/X{n}")):
            stale.unlink(missing_ok=True)
        return False
    except PermissionError:
        return True


def _wait_gone(pids: list[int], timeout: float) -> None:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not left:
            return
        time.sleep(0.05)
    logger.warning("processes still alive after stop: %s", left)


if __name__ == "__main__":  # manual check: python -m verl_cua.envs.osworld.local_desktop
    d = LocalDesktop()
    t0 = time.monotonic()
    d.start()
    print(f"ready in {time.monotonic() - t0:.2f}s at {d.url} display :{d.display}", file=sys.stderr)
    d.stop()
