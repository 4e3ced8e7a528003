"""Launch one local desktop (Xvfb + openbox + D-Bus + our OSWorld-protocol server) in a sandbox, no VM.

The sandbox (bubblewrap; see `sandbox`): its own PID, IPC, UTS, mount and network namespaces, a filesystem by
allow-list (read-only system dirs, the desktop's Python, its runtime files) with size-limited tmpfs for /home,
/tmp, /dev/shm, /var/tmp, /run/lock and the XDG dir, two uids of its own (root: the agent's, and the machinery's
for the server, Xvfb and the evaluator's commands) or a user namespace (rootless), cgroup limits (root) and
RLIMIT_NPROC. Its network namespace has loopback only: the server
and Chromium's CDP listen on unix sockets the host relays to TCP on the desktop's own loopback address
(127.77.x.y), for this host user only, and the server refuses requests without the desktop's token (it reaches
the server through a pipe and lives only in its non-dumpable memory; OSWorld's client reads it from netrc).
A keeper outside the sandbox kills its whole PID namespace when the owner closes the desktop or dies, however.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import fcntl
import json
import logging
import os
import re
import secrets
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO

import requests

from verl_cua.envs.osworld import sandbox
from verl_cua.envs.osworld.host_relay import UnixRelay
from verl_cua.resources import DESKTOP_HINT, envs_dir

logger = logging.getLogger(__name__)

SETUP_HINT = DESKTOP_HINT
DESKTOP_VENV = os.environ.get("VERL_CUA_DESKTOP_VENV", "/opt/verl-cua/desktop-venv")
# the apps' first-run files (VLC's vlcrc, GIMP's config), made by setup.sh and laid over the HOME template
APP_HOME = Path(os.environ.get("VERL_CUA_DESKTOP_APP_HOME", "/opt/verl-cua/desktop-home"))
# runtime dirs (root-owned, 0700): the sandbox sees only what is bound from them
RUNTIME_ROOT = Path(
    os.environ.get("VERL_CUA_DESKTOP_RUNTIME")
    or ("/var/tmp/verl-cua-desktop" if os.geteuid() == 0 else f"/var/tmp/verl-cua-desktop-{os.geteuid()}")
)
HOME_TEMPLATE = envs_dir() / "local_desktop" / "home"
SERVER_FILES = ("desktop_server.py", "desktop_a11y.py", "desktop_setup.py", "desktop_launcher.py")
REQUIRED_BINARIES = {  # binary -> Debian package
    "bwrap": "bubblewrap",
    "Xvfb": "xvfb",
    "openbox": "openbox",
    "dbus-daemon": "dbus",
    "xdotool": "xdotool",
    "wmctrl": "wmctrl",
    "xdpyinfo": "x11-utils",
    "setpriv": "util-linux",
    "prlimit": "util-linux",
}
# the apps of OSWorld's image, by the program its tasks run -> Debian package (setup.sh installs them all)
APP_PACKAGES = {
    "libreoffice": "libreoffice-calc", "soffice": "libreoffice-calc", "chromium": "chromium", "vlc": "vlc",
    "gimp": "gimp", "totem": "totem", "gnome-terminal": "gnome-terminal", "socat": "socat", "sar": "sysstat",
    "pulseaudio": "pulseaudio", "pactl": "pulseaudio-utils", "gsettings": "libglib2.0-bin", "dconf": "dconf-cli",
    "xterm": "xterm",
}  # fmt: skip
FIRST_DISPLAY = 100
INFRA = ("server", "xvfb", "openbox", "dbus", "launcher")  # what healthy() requires alive (named by the server)
MACHINERY = ("server", "xvfb")  # root mode: what runs as the server's uid, moved into its own cgroups once ready
PAIR_BUFFER = 4 << 20  # the launcher's socket pair: one request (argv, environment) fits
NETWORKS = ("none", "egress")  # none: loopback only; egress: the web through the host's proxy (public addresses only)
PROXY_EXEMPT = "127.77.0.0/16"  # every desktop's loopback address: never through the user's HTTP proxy
CDP_PORT = 9222  # Chromium's CDP inside the desktop's own network namespace (so the same for every desktop)
# D-Bus session config: the standard one minus the user's service dirs ($XDG_DATA_HOME/dbus-1/services), so the
# agent cannot register a bus-activated service of its own; the socket is where OSWorld's tasks expect it, in the
# private XDG runtime dir
DBUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:path=/run/user/1000/bus</listen>
  <auth>EXTERNAL</auth>
  <servicedir>/usr/share/dbus-1/services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
BROWSERS = ("chromium", "google-chrome", "chromium-browser", "google-chrome-stable")
CHROMIUM_BINARY = "/usr/lib/chromium/chromium"
BROWSER_WRAPPER = f"""#!/bin/sh
# Debian's Chromium as OSWorld's tasks expect Google Chrome: the profile in ~/.config/google-chrome (where OSWorld's
# getters read it), CDP on the port the task asks for (default {CDP_PORT}, which the host relays), and its
# accessibility tree on AT-SPI.
port={CDP_PORT}
args=""
for a in "$@"; do case "$a" in --remote-debugging-port=*) port="${{a#*=}}" ;; --remote-debugging-address=*) ;;
    *) args="$args
$a" ;; esac; done
IFS='
'
export ACCESSIBILITY_ENABLED=1
exec {CHROMIUM_BINARY} --remote-debugging-port="$port" --remote-debugging-address=127.0.0.1 \\
    --no-first-run --no-default-browser-check --disable-gpu --no-sandbox --password-store=basic \\
    --disable-dev-shm-usage --force-renderer-accessibility --user-data-dir="$HOME/.config/google-chrome" \\
    ${{VERL_CUA_PROXY:+--proxy-server=$VERL_CUA_PROXY}} $args
"""
# `sudo` inside the desktop: the command runs as the desktop's own user, so a task's `echo password | sudo -S cmd`
# works as far as no privilege is needed; it grants nothing (no setuid binary works under no_new_privs anyway)
SUDO_SHIM = """#!/bin/sh
while [ $# -gt 0 ]; do
    case "$1" in
        -S|--stdin) read -r _ || true; shift ;;
        -u|-g|-p|-C|-h|-U|-r|-t|-T|-D|--user|--group|--prompt) shift 2 ;;
        --) shift; break ;;
        -*) shift ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: sudo command [args]" >&2; exit 1; }
exec "$@"
"""
# `pkill`/`pgrep` inside the desktop: a pattern naming Chrome also matches Chromium (OSWorld's tasks `pkill chrome`
# to restart the browser; Chromium's processes are named `chromium`)
PROCESS_MATCH_SHIM = """#!/bin/sh
tool=$(basename "$0")
last=""
for a in "$@"; do last=$a; done
case "$last" in
    -*|"") exec /usr/bin/$tool "$@" ;;
esac
pattern=$(printf '%s' "$last" | sed 's/chrome/chrom(e|ium)/g')
n=$#
i=1
for a in "$@"; do
    if [ "$i" -lt "$n" ]; then set -- "$@" "$a"; fi
    i=$((i + 1))
done
shift "$n"
exec /usr/bin/$tool "$@" "$pattern"
"""
OPENBOX_SYSTEM = "/etc/xdg/openbox"  # where openbox's system menu lives (read-only inside the desktop)
# keys OSWorld's Ubuntu desktop binds (openbox's own rc.xml plus these)
OPENBOX_KEYS = """<keybind key="C-A-t"><action name="Execute"><command>gnome-terminal</command></action></keybind>
"""
# GSettings defaults that OSWorld's Ubuntu image has and its tasks depend on (compiled with `dconf compile`)
DCONF_DEFAULTS = """[org/gnome/desktop/screensaver]
lock-enabled=false
"""


def missing_apps() -> list[str]:
    """Debian packages of OSWorld's image apps that are not installed here (Impress by its registry file)."""
    missing = {pkg for program, pkg in APP_PACKAGES.items() if shutil.which(program) is None}
    if shutil.which("libreoffice") and not Path("/usr/lib/libreoffice/share/registry/impress.xcd").exists():
        missing.add("libreoffice-impress")
    return sorted(missing)


def install_hint(failure: str) -> str:
    """` (not installed: apt-get install -y PKG, ...)` when a setup failure names an app of OSWorld's image that is
    not installed here, else ""."""
    for program, package in APP_PACKAGES.items():
        if re.search(rf"(?<![\w.-]){re.escape(program)}(?![\w.-])", failure) and shutil.which(program) is None:
            return f" (not installed: apt-get install -y {package}, or {SETUP_HINT} as root)"
    return ""


class DesktopStartError(RuntimeError):
    """The local desktop did not come up (missing packages are named with the apt command)."""


def check_system() -> None:
    """One-line error naming the setup command when a system package, the desktop Python or namespaces are missing."""
    needed = dict(REQUIRED_BINARIES)
    if os.geteuid() != 0:
        needed.pop("setpriv")
    missing = [b for b in needed if shutil.which(b) is None]
    if missing:
        packages = " ".join(sorted({needed[b] for b in missing}))
        raise DesktopStartError(
            f"the local desktop needs {', '.join(missing)}: apt-get install -y --no-install-recommends {packages} "
            f"(or run {SETUP_HINT} as root for everything it uses)"
        )
    if os.geteuid() != 0 and (why := sandbox.rootless_supported()):
        raise DesktopStartError(
            f"the local desktop cannot build a rootless sandbox here: {why}; run as root (or enable unprivileged "
            "user namespaces: sysctl kernel.unprivileged_userns_clone=1), or use a VM provider (e.g. provider=docker)"
        )
    if not os.access(f"{DESKTOP_VENV}/bin/python", os.X_OK):
        raise DesktopStartError(f"the local desktop needs its Python at {DESKTOP_VENV}: run {SETUP_HINT}")


def missing_uno_bridge() -> str | None:
    """Why the api_gui format's app APIs cannot reach LibreOffice in the desktop (its Python lacks `uno`), or None."""
    try:
        proc = subprocess.run([f"{DESKTOP_VENV}/bin/python", "-c", "import uno"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the desktop's Python at {DESKTOP_VENV} does not run ({type(exc).__name__}): run {SETUP_HINT}"
    if proc.returncode != 0:
        return (
            "api_gui's app APIs need LibreOffice's Python bridge in the desktop: apt-get install -y python3-uno "
            f"(or run {SETUP_HINT} as root)"
        )
    return None


def _exempt_from_proxy() -> None:
    """Put the desktops' loopback range in NO_PROXY and no_proxy (both, merged: requests prefers lowercase)."""
    entries: list[str] = []
    for var in ("no_proxy", "NO_PROXY"):
        entries += [e.strip() for e in os.environ.get(var, "").split(",") if e.strip() and e.strip() not in entries]
    if PROXY_EXEMPT not in entries:
        entries.append(PROXY_EXEMPT)
    value = ",".join(entries)
    for var in ("no_proxy", "NO_PROXY"):
        if os.environ.get(var) != value:
            os.environ[var] = value


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
        """Record `host`'s token (the file is created on first use and removed at interpreter exit)."""
        with self._lock:
            _exempt_from_proxy()
            if self._path is None:
                previous = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
                self._base = Path(previous).read_text() if os.path.isfile(previous) else ""
                directory = tempfile.mkdtemp(prefix="verl-cua-netrc-")
                atexit.register(shutil.rmtree, directory, True)
                self._path = Path(directory) / "netrc"
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
        """Point $NETRC at our file again if something replaced it (and keep the proxy exemption)."""
        with self._lock:
            _exempt_from_proxy()
            if self._path is not None and os.environ.get("NETRC") != str(self._path):
                os.environ["NETRC"] = str(self._path)

    def _write(self) -> None:
        lines = [f"machine {h} login {t} password x" for h, t in self._entries.items()]
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(self._base + "\n" + "\n".join(lines) + "\n")
        tmp.chmod(0o600)
        tmp.replace(self._path)


NETRC = _Netrc()


class LocalDesktop:
    """One sandboxed desktop; `address` is what OSWorld's provider interface returns.

    Thread-safe: start/stop/alive/pids hold one re-entrant lock (the pool may kill a desktop while another thread
    asks whether it is alive).
    """

    def __init__(
        self, *, screen: tuple[int, int] = (1920, 1080), start_timeout: float = 60.0,
        limits: sandbox.Limits | None = None, network: str | None = None,
    ):  # fmt: skip
        network = network or os.environ.get("VERL_CUA_DESKTOP_NETWORK", "none")
        if network not in NETWORKS:
            raise ValueError(f"unknown local desktop network {network!r}; valid: {', '.join(NETWORKS)}")
        check_system()
        self.network = network
        self._egress = None
        self.screen = screen
        self.start_timeout = start_timeout
        self.limits = limits or sandbox.Limits.from_env()
        self.proc: subprocess.Popen | None = None  # the keeper (outside the sandbox)
        self.init = None  # psutil.Process of the sandbox's PID-namespace init (its death ends the namespace)
        self.runtime: Path | None = None
        self.identity: sandbox.Identity | None = None
        self.cgroups: list[Path] = []
        self.machinery_cgroups: list[Path] = []
        self._relays: list[UnixRelay] = []
        self._lock = threading.RLock()
        self._spare: tuple[LocalDesktop, threading.Thread] | None = None  # prepare(): the next episode's sandbox
        self._display_lock = None
        self.display = self.port = self.cdp_port = None
        self.host = "127.0.0.1"
        self.token = ""

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Boot the sandbox, Xvfb, openbox, D-Bus and the server; return when the first screenshot is served."""
        if missing := missing_apps():
            apps = " ".join(missing)
            sandbox.warn_once(f"local desktop: OSWorld's tasks for these apps will fail their setup: {apps} missing "
                              f"(apt-get install -y {apps}, or {SETUP_HINT} as root)")  # fmt: skip
        with self._lock:
            self.stop()
            for _ in range(8):  # a slot whose uid holds keys that cannot be cleared is skipped (clear_keyrings)
                self._allocate_display()
                _prune_stale_runtimes(self.display)
                try:
                    self.identity = sandbox.identity(self.display)
                except RuntimeError as exc:
                    self.stop()
                    raise DesktopStartError(str(exc)) from None
                if sandbox.clear_keyrings(self.identity):
                    break
                _TAINTED.add(self.display)
                self._display_lock.close()
                self._display_lock = None
            else:
                raise DesktopStartError("8 desktop slots in a row hold kernel keys that cannot be cleared; see the log")
            self.host = f"127.77.{self.display // 256}.{self.display % 256}"
            self.token = secrets.token_hex(16)
            NETRC.add(self.host, self.token)
            RUNTIME_ROOT.mkdir(parents=True, exist_ok=True)
            RUNTIME_ROOT.chmod(0o711)
            runtime = Path(tempfile.mkdtemp(prefix=f"d{self.display}-", dir=RUNTIME_ROOT))
            self.runtime = runtime
            self._prepare_runtime(runtime)
            infra = sandbox.infra_binaries(RUNTIME_ROOT)
            name = runtime.name
            sandbox.remove_cgroups(name)
            self.cgroups = sandbox.create_cgroups(name, self.limits)
            from verl_cua.envs.osworld import cdp_pin

            cdp_pin.install()  # wherever a local desktop runs, Playwright's CDP connections are pinned to it
            self.machinery_cgroups = sandbox.create_machinery_cgroups(name, self.limits) if self.cgroups else []
            token_r, token_w = os.pipe()
            info_r, info_w = os.pipe()  # bubblewrap writes the namespace init's pid there
            seccomp_r, seccomp_w = os.pipe()  # the keyring filter, read by bubblewrap at start
            os.write(seccomp_w, sandbox.keyring_filter())
            os.close(seccomp_w)
            pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # the launcher's end, the server's
            for end in pair:
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PAIR_BUFFER)
                end.set_inheritable(True)
            # the server's and CDP's listening sockets are made here, on the host side, and handed to the server as
            # fds: the socket dir is never bound into the sandbox, so nothing the agent writes lands on the host
            listeners = [_unix_listener(runtime / "sock" / name) for name in ("server.sock", "cdp.sock")]
            inner = ["/usr/bin/env", "-i", *self._environment()]
            launcher = [*inner, f"{DESKTOP_VENV}/bin/python", "-s", f"{sandbox.PUB}/server/desktop_launcher.py"]
            launcher += ["--socket-fd", str(pair[0].fileno()), "--home", sandbox.HOME]
            launcher += ["--template", f"{sandbox.PUB}/home_template"]
            inner += [f"{DESKTOP_VENV}/bin/python", "-s", f"{sandbox.PUB}/server/desktop_server.py"]
            inner += ["--token-fd", str(token_r)]
            inner += ["--socket-fd", str(listeners[0].fileno()), "--cdp-socket-fd", str(listeners[1].fileno())]
            inner += ["--cdp-port", str(CDP_PORT), "--display", f":{self.display}"]
            inner += ["--screen", f"{self.screen[0]}x{self.screen[1]}", "--home", sandbox.HOME]
            inner += ["--template", f"{sandbox.PUB}/home_template", "--infra", sandbox.INFRA_DIR]
            inner += ["--dbus-config", f"{sandbox.PUB}/dbus.conf", "--openbox-config", f"{sandbox.PUB}/openbox.xml"]
            inner += ["--max-file-bytes", str(self.limits.max_file), "--max-output-bytes", str(self.limits.max_output)]
            inner += ["--launcher-fd", str(pair[1].fileno())]
            proxy_socket = None
            if self.network == "egress":
                from verl_cua.envs.osworld.egress import EgressProxy

                proxy_socket = runtime / "sock" / "proxy.sock"
                self._egress = EgressProxy(str(proxy_socket))
                inner += ["--proxy-socket", f"{sandbox.SOCK}/proxy.sock"]
            argv = sandbox.bwrap_argv(
                ident=self.identity, runtime=runtime, infra=infra, venv=DESKTOP_VENV, limits=self.limits,
                info_fd=info_w, server=inner, launcher=launcher, pair=(pair[0].fileno(), pair[1].fileno()),
                seccomp_fd=seccomp_r, proxy_socket=proxy_socket,
                servers_only=(token_r, *(listener.fileno() for listener in listeners)),
            )  # fmt: skip
            handed = (token_r, info_w, seccomp_r, *(end.fileno() for end in pair))
            handed += tuple(listener.fileno() for listener in listeners)
            try:
                self.proc = subprocess.Popen(
                    sandbox.keeper_argv(self.cgroups, argv, handed), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, start_new_session=True, pass_fds=handed,
                )  # fmt: skip
                _drain_log(self.proc.stdout, runtime / "server.log", self.limits.max_log)
            finally:
                for fd in (token_r, info_w, seccomp_r):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                for listener in [*listeners, *pair]:  # only the server accepts on them now
                    listener.close()
            try:  # the token reaches the server through a pipe: never a file, argv or environment the desktop sees
                os.write(token_w, f"{self.token}\n".encode())
            except OSError:
                pass  # the sandbox died at once: _wait_ready reports why
            finally:
                os.close(token_w)
            self._wait_ready(info_r)
            self._move_machinery()

    def _move_machinery(self) -> None:
        """Root mode: the server and Xvfb (the server's uid) into their own cgroups, before the agent's first action;
        every command the server starts from then on is born there."""
        if not self.machinery_cgroups:
            return
        infra = self.request("GET", "/_verl_cua/health", timeout=10).json()["infra"]
        pids = [self.host_pid(infra[name]) for name in MACHINERY if isinstance(infra.get(name), int)]
        if None in pids or len(pids) != len(MACHINERY):
            sandbox.warn_once(f"local desktop: the server's processes were not found ({infra}); they stay in the "
                              "agent's cgroup")  # fmt: skip
        sandbox.join_cgroups(self.machinery_cgroups, [pid for pid in pids if pid is not None])

    @contextlib.contextmanager
    def evaluation(self):
        """While it lasts, the server runs the evaluator's commands as its own user (no agent process can see, stop
        or trace them), each bounded by its own timeout; setup routes (postconfig) stay the agent's. Fails closed:
        raises when the server does not take the phase (the evaluation then never runs as the agent's)."""
        url, token = self.url, self.token  # this sandbox's, even if a revert replaces it meanwhile
        headers = {"Authorization": f"Bearer {token}"}
        phase = f"{url}/_verl_cua/phase"
        requests.post(phase, json={"phase": "evaluate"}, headers=headers, timeout=10).raise_for_status()
        try:
            yield
        finally:
            with contextlib.suppress(requests.RequestException):
                requests.post(phase, json={"phase": "act"}, headers=headers, timeout=10)

    def revert(self) -> None:
        """End the episode's sandbox whole (every process, the X server, the window manager, IPC, every tmpfs) and
        take a fresh one: the one `prepare()` started, or a new one. Raises DesktopStartError when none comes up."""
        fresh = self._take_spare() or self._sibling()
        if not fresh.alive():
            fresh.start()
        with self._lock:
            old = copy.copy(self)  # takes over the last episode's sandbox, to end it
            old._lock, old._spare = threading.RLock(), None
            self.__dict__.update({key: value for key, value in fresh.__dict__.items() if key not in _OWN})
            fresh._forget()  # the sandbox is ours now: fresh must not stop it when it is collected
        if old.init is not None:  # nothing of the last episode runs on while the next one starts
            with contextlib.suppress(Exception):
                old.init.kill()
        threading.Thread(target=old.stop, name=f"stop-desktop-{old.display}", daemon=True).start()

    def prepare(self) -> None:
        """Start the next episode's sandbox in the background (e.g. while this episode is evaluated); `revert()`
        then takes it instead of waiting for a new one. At most one is kept."""
        with self._lock:
            if self._spare is not None or self.init is None:
                return
            spare = self._sibling()
            waiter = threading.Thread(target=_start_quietly, args=(spare,), name="prepare-desktop", daemon=True)
            self._spare = (spare, waiter)
            waiter.start()

    def _take_spare(self) -> LocalDesktop | None:
        with self._lock:
            pending, self._spare = self._spare, None
        if pending is None:
            return None
        spare, waiter = pending
        waiter.join()
        if spare.alive():
            return spare
        spare.stop()
        return None

    def _forget(self) -> None:
        """Drop every handle on a sandbox without ending it (another LocalDesktop has taken it over)."""
        self.proc = self.init = self.runtime = self.identity = self._egress = self._display_lock = None
        self._relays, self.cgroups, self.machinery_cgroups, self.token = [], [], [], ""

    def _sibling(self) -> LocalDesktop:
        """A desktop with the same screen, limits and network (not started)."""
        return LocalDesktop(screen=self.screen, start_timeout=self.start_timeout, limits=self.limits,
                            network=self.network)  # fmt: skip

    def stop(self) -> None:
        """Kill the sandbox's PID namespace (every process in it), close the openings, clear the uid's keyrings,
        remove the runtime dir; the same for a prepared spare."""
        with self._lock:
            pending, self._spare = self._spare, None
            if pending is not None:
                pending[1].join()
                pending[0].stop()
            for relay in [*self._relays, *([self._egress] if self._egress is not None else [])]:
                relay.close()
            self._relays, self._egress = [], None
            init, self.init = self.init, None
            if init is not None:
                _kill(init)
            proc, self.proc = self.proc, None
            if proc is not None:
                if proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        proc.stdin.close()  # the keeper's `cat` ends: bubblewrap and its namespace die with it
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait(timeout=5)
            if self.token:
                NETRC.remove(self.host, self.token)
                self.token = ""
            self.cgroups, self.machinery_cgroups = [], []
            if self.identity is not None and self.runtime is not None:
                sandbox.clear_keyrings(self.identity)
            if self.runtime is not None:
                sandbox.remove_cgroups(self.runtime.name)
                shutil.rmtree(self.runtime, ignore_errors=True)
                self.runtime = None
            if self._display_lock is not None:
                self._display_lock.close()
                self._display_lock = None

    def begin_setup(self) -> None:
        """Forget the failures and apps of any earlier setup (one that raised is never settled, nor always reverted)."""
        self.request("POST", "/_verl_cua/begin_setup", timeout=30).raise_for_status()

    def settle(self, timeout: float) -> dict:
        """Wait (at most `timeout` s) until the apps the task's setup launched show a window; `{failures, pending,
        waited_s}`: failed setup calls and apps that exited with an error, apps still without a window."""
        response = self.request("POST", "/_verl_cua/settle", json={"timeout": timeout}, timeout=timeout + 30)
        response.raise_for_status()
        return response.json()

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
        """Whether the sandbox's init is still running (cheap; no request)."""
        with self._lock:
            return self.init is not None and _running(self.init)

    def host_fault(self) -> str | None:
        """Why the desktop broke for a reason outside the agent's reach (its keeper gone), else None."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is not None:
                return f"the desktop's keeper exited ({self.proc.returncode})"
        return None

    def healthy(self) -> bool:
        """Whether the server answers and reports the server, Xvfb, openbox and D-Bus alive."""
        if not self.alive():
            return False
        try:
            response = self.request("GET", "/_verl_cua/health", timeout=5)
            infra = response.json().get("infra") if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return False
        return isinstance(infra, dict) and all(isinstance(infra.get(name), int) for name in INFRA)

    def pids(self) -> list[int]:
        """Host pids of every process of the desktop: the keeper, bubblewrap, and all of the sandbox's namespace."""
        import psutil

        with self._lock:
            if self.proc is None:
                return []
            try:
                keeper = psutil.Process(self.proc.pid)
                return [keeper.pid, *(p.pid for p in keeper.children(recursive=True))]
            except psutil.Error:
                return []

    def host_pid(self, pid: int) -> int | None:
        """The host pid of the sandbox's process `pid` (as the server inside reports it), None when there is none."""
        for p in _namespace_processes(self.init) if self.init is not None else []:
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{p.pid}/status") as f:
                    nspid = next(line for line in f if line.startswith("NSpid:")).split()
                if int(nspid[-1]) == pid and len(nspid) > 2:
                    return p.pid
        return None

    def usage(self) -> dict[str, int]:
        """`{pids, memory}` the desktop uses now, from its cgroups ({} without cgroups)."""
        return sandbox.cgroup_usage(self.cgroups)

    # -- internals ------------------------------------------------------------------------------------------------
    def _allocate_display(self) -> None:
        RUNTIME_ROOT.mkdir(parents=True, exist_ok=True)
        for n in range(FIRST_DISPLAY, FIRST_DISPLAY + 1000):
            if n in _TAINTED:
                continue
            lock = _lock_display(n)  # held for the desktop's life
            if lock is None:
                continue
            self.display, self._display_lock = n, lock
            return
        raise DesktopStartError("no free desktop slot in 100-1099")

    def _prepare_runtime(self, runtime: Path) -> None:
        """pub/ (read-only inside: server, HOME template, browser wrapper, D-Bus config, passwd, Xauthority), sock/."""
        ident = self.identity
        runtime.chmod(0o700)
        pub = runtime / "pub"
        (pub / "server").mkdir(mode=0o755, parents=True)
        pub.chmod(0o755)
        for name in SERVER_FILES:
            shutil.copyfile(Path(__file__).with_name(name), pub / "server" / name)
            (pub / "server" / name).chmod(0o644)
        shutil.copytree(HOME_TEMPLATE, pub / "home_template", symlinks=True)
        if APP_HOME.is_dir():
            shutil.copytree(APP_HOME, pub / "home_template", symlinks=True, dirs_exist_ok=True)
        else:
            sandbox.warn_once(
                f"local desktop: no apps' first-run files at {APP_HOME} (VLC, GIMP start unconfigured): {SETUP_HINT}"
            )
        for path in [pub / "home_template", *(pub / "home_template").rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() or path.stat().st_mode & 0o100 else 0o644)
        (pub / "bin").mkdir(mode=0o755)
        for name in BROWSERS:
            (pub / "bin" / name).write_text(BROWSER_WRAPPER)
            (pub / "bin" / name).chmod(0o755)
        for name, text in (("sudo", SUDO_SHIM), ("pkill", PROCESS_MATCH_SHIM), ("pgrep", PROCESS_MATCH_SHIM)):
            (pub / "bin" / name).write_text(text)
            (pub / "bin" / name).chmod(0o755)
        _openbox_config(pub / "openbox.xml")
        _dconf_defaults(pub / "home_template")
        passwd, group = sandbox.passwd_files(ident)
        (pub / "etc").mkdir(mode=0o755)  # the top layer of /etc's overlay (root mode)
        for name, text in (("dbus.conf", DBUS_CONFIG), ("passwd", passwd), ("group", group),
                           ("etc/passwd", passwd), ("etc/group", group)):  # fmt: skip
            (pub / name).write_text(text)
            (pub / name).chmod(0o644)
        (pub / "Xauthority").write_bytes(_xauthority(str(self.display), secrets.token_bytes(16)))
        (runtime / "sock").mkdir(mode=0o700)
        if not ident.rootless:  # the agent's, and readable by the server's group (Xvfb, screenshots, xdotool)
            os.chown(pub / "Xauthority", ident.uid, ident.machinery if ident.split else ident.gid)
        (pub / "Xauthority").chmod(0o440 if ident.split else 0o400)

    def _environment(self) -> list[str]:
        env = {
            "DISPLAY": f":{self.display}",
            "XAUTHORITY": f"{sandbox.PUB}/Xauthority",
            "HOME": sandbox.HOME,
            "USER": "user",
            "LOGNAME": "user",
            "PATH": f"{sandbox.PUB}/bin:{DESKTOP_VENV}/bin:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "XDG_SESSION_TYPE": "x11",
            "XDG_RUNTIME_DIR": sandbox.XDG_RUNTIME,
            "TMPDIR": "/tmp",
            "GTK_MODULES": "gail:atk-bridge",
            "SAL_USE_VCLPLUGIN": "gtk3",
            "NO_AT_BRIDGE": "0",
        }
        return [f"{k}={v}" for k, v in env.items()]

    def _wait_ready(self, info_r: int) -> None:
        """Read the sandbox's init pid from bubblewrap, open the host relays, wait for the first screenshot."""
        import psutil

        deadline = time.monotonic() + self.start_timeout
        last = "no answer"
        try:
            info = b""
            while b"}" not in info and time.monotonic() < deadline and self.proc.poll() is None:
                if select.select([info_r], [], [], 0.1)[0]:
                    chunk = os.read(info_r, 4096)
                    if not chunk:
                        break
                    info += chunk
            with contextlib.suppress(ValueError, psutil.Error):
                self.init = psutil.Process(int(json.loads(info.decode())["child-pid"]))
        finally:
            os.close(info_r)
        if self.init is not None:
            sock = self.runtime / "sock"
            self._relays = [UnixRelay(self.host, str(sock / name)) for name in ("server.sock", "cdp.sock")]
            self.port, self.cdp_port = self._relays[0].port, self._relays[1].port
        while self.init is not None and time.monotonic() < deadline:
            if self.proc.poll() is not None or not _running(self.init):
                break
            try:  # the host made the socket: a request waits in its backlog until the server accepts
                response = self.request("GET", "/screenshot", timeout=5)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}"
            except requests.RequestException as exc:
                last = type(exc).__name__
            time.sleep(0.02)
        log = ""
        if self.runtime is not None and (self.runtime / "server.log").exists():
            lines = (self.runtime / "server.log").read_text(errors="replace").strip().splitlines()
            log = f"; server log: {lines[-1][:300]}" if lines else ""
        rc = self.proc.poll()
        self.stop()
        if rc == sandbox.STAGE_FAILED:
            raise DesktopStartError(f"local desktop not started: its root stage could not mount /proc or /usr{log}")
        if rc == sandbox.CGROUP_FAILED:
            raise DesktopStartError(f"local desktop not started: it could not join its cgroups{log}")
        if rc == 1 and "bwrap" in log:
            raise DesktopStartError(f"local desktop not started, its sandbox could not be set up{log}")
        raise DesktopStartError(f"local desktop did not start ({last}, exit {rc}){log}")

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


_OWN = ("_lock", "_spare")  # what a LocalDesktop keeps when revert() moves a fresh sandbox into it
_TAINTED: set[int] = set()  # displays whose agent uid holds keys that cannot be cleared: never used by this process


def _start_quietly(desktop: LocalDesktop) -> None:
    """start() for a background thread: a failure leaves the desktop stopped (revert then starts a new one)."""
    try:
        desktop.start()
    except Exception as exc:
        logger.warning("preparing the next local desktop failed (%s); the reset will start one", exc)


def _unix_listener(path: Path) -> socket.socket:
    """A listening unix socket at `path` (host side: handed to the sandbox's server as a file descriptor)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    listener.set_inheritable(True)
    return listener


def _drain_log(stream, path: Path, cap: int) -> None:
    """Copy the sandbox's output to `path` in a daemon thread, at most `cap` bytes and then one line saying so;
    the rest is read and dropped (a chatty or hostile desktop never fills the host's disk nor blocks)."""

    def drain() -> None:
        written = 0
        with stream, open(path, "wb") as log:
            while chunk := stream.read1(65536):
                if written < cap:
                    log.write(chunk[: cap - written])
                    log.flush()
                    written += len(chunk)
                    if written >= cap:
                        log.write(f"\n[verl-cua: log capped at {cap} bytes; the rest is dropped]\n".encode())
                        log.flush()

    threading.Thread(target=drain, name=f"desktop-log-{path.parent.name}", daemon=True).start()


def _openbox_config(path: Path) -> None:
    """openbox's system rc.xml with OSWorld's Ubuntu key bindings added (read-only inside the desktop), its menus by
    absolute path: openbox reads no menu from the agent's HOME (a menu entry there could run the agent's program)."""
    system = Path("/etc/xdg/openbox/rc.xml")
    text = system.read_text() if system.is_file() else "<openbox_config><keyboard></keyboard></openbox_config>"
    text = re.sub(r"<file>\s*([^/<\s][^<]*?)\s*</file>", lambda m: f"<file>{OPENBOX_SYSTEM}/{m.group(1)}</file>", text)
    path.write_text(text.replace("<keyboard>", "<keyboard>\n" + OPENBOX_KEYS, 1))
    path.chmod(0o644)


def _dconf_defaults(home: Path) -> None:
    """HOME's dconf database with DCONF_DEFAULTS (skipped, with a warning, without `dconf`)."""
    if shutil.which("dconf") is None:
        sandbox.warn_once("local desktop: no dconf (apt-get install dconf-cli); GSettings keep their schema defaults")
        return
    with tempfile.TemporaryDirectory() as keyfiles:
        (Path(keyfiles) / "00-osworld").write_text(DCONF_DEFAULTS)
        target = home / ".config" / "dconf"
        target.mkdir(parents=True, exist_ok=True)
        target.chmod(0o755)
        subprocess.run(["dconf", "compile", str(target / "user"), keyfiles], check=True, capture_output=True)
        (target / "user").chmod(0o644)


def _prune_stale_runtimes(mine: int) -> None:
    """Remove runtime dirs of desktops whose owner is gone: their display lock is free, or is ours (`mine`, held
    before our runtime dir exists), since the lock is held for a desktop's whole life."""
    for runtime in RUNTIME_ROOT.glob("d*-*"):
        display = runtime.name[1:].split("-", 1)[0]
        if not display.isdigit() or not runtime.is_dir():
            continue
        lock = contextlib.nullcontext() if int(display) == mine else _lock_display(int(display))
        if lock is None:
            continue  # a live desktop (of this or another process) holds the display
        with lock:
            shutil.rmtree(runtime, ignore_errors=True)
            sandbox.remove_cgroups(runtime.name)


def _lock_display(n: int) -> TextIO | None:
    """The lock file of display :n, locked exclusively, or None when a desktop holds it."""
    lock = open(RUNTIME_ROOT / f"display-{n}.lock", "w")  # noqa: SIM115 - the caller keeps or closes it
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def _xauthority(display: str, cookie: bytes) -> bytes:
    """The display's MIT-MAGIC-COOKIE-1 for the sandbox's host name (FamilyLocal, which python-xlib needs) and for
    any host name (FamilyWild)."""
    fields = [display.encode(), b"MIT-MAGIC-COOKIE-1", cookie]
    out = b""
    for family, address in ((256, sandbox.HOSTNAME.encode()), (0xFFFF, b"")):
        out += family.to_bytes(2, "big") + b"".join(len(f).to_bytes(2, "big") + f for f in (address, *fields))
    return out


def _namespace_processes(init) -> list:
    """psutil.Process objects of a PID namespace: its init and all its descendants (orphans go to the init)."""
    import psutil

    try:
        return [init, *init.children(recursive=True)]
    except psutil.Error:
        return []


def _kill(init) -> None:
    """SIGKILL a PID namespace's init (the kernel then kills every process in the namespace) and wait for them."""
    import psutil

    procs = _namespace_processes(init)
    with contextlib.suppress(psutil.Error):
        init.kill()
    _gone, alive = psutil.wait_procs(procs, timeout=10)
    if alive:
        logger.warning("processes still alive after stop: %s", [p.pid for p in alive])


def _running(p) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


if __name__ == "__main__":  # manual check: python -m verl_cua.envs.osworld.local_desktop
    d = LocalDesktop()
    t0 = time.monotonic()
    d.start()
    print(f"ready in {time.monotonic() - t0:.2f}s at {d.url} display :{d.display}", file=sys.stderr)
    d.stop()
