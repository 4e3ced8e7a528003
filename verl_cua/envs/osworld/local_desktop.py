"""Launch one local desktop (Xvfb + openbox + D-Bus + our OSWorld-protocol server) in a sandbox, no VM.

Needs root. The desktop runs as an unprivileged user (created on first use) in its own mount namespace in which
the project tree and the launching user's HOME are hidden under empty, unreadable tmpfs mounts (fail closed: a
mount that fails stops the start); it has its own HOME (restored from a root-owned template on every revert),
X display with an Xauthority cookie (no TCP, no abstract socket), and an HTTP server bound to its own loopback
address that refuses requests without this instance's token. The runtime directory (template, server code,
browser wrapper) is root-owned and read-only to the desktop user, which owns only its HOME and XDG runtime dir.
The token reaches the server over a stdin pipe and lives only in the server's memory (non-dumpable process); the
pipe stays open while the desktop's owner lives, so a desktop never outlives the process that started it (a
trainer or Ray worker killed with SIGKILL included), and the next start removes the runtime dirs it left.
Where iptables is installed, the desktop user's new outgoing connections to loopback, private and link-local
addresses and to any of this host's own addresses are rejected (the resolver and each desktop's internal CDP
port excepted), so the agent cannot reach Ray's dashboard or other services of the trainer;
without iptables one warning is logged.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import pwd
import secrets
import shlex
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
INFRA = ("server", "xvfb", "openbox")  # what healthy() requires alive (the server's /_verl_cua/health names them)
PROXY_EXEMPT = "127.77.0.0/16"  # every desktop's loopback address: never through the user's HTTP proxy
SANDBOX_FAILED = 97  # exit status of the sandbox shell when a mount (private /tmp, a hidden path) fails
# D-Bus session config: the standard one minus the user's service dirs ($XDG_DATA_HOME/dbus-1/services), so
# the agent cannot register a bus-activated service that would start outside the server's process tree; the
# socket is a file in the private /tmp (`unix:tmpdir` would be an abstract socket, reachable host-wide)
DBUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:dir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>/usr/share/dbus-1/services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
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
    """One-line error naming the setup command when not root, or a system package or the desktop Python is missing."""
    if os.geteuid() != 0:
        raise DesktopStartError(
            "the local desktop must be started as root (it creates a sandbox user and mounts a private namespace): "
            "run as root, or use a VM provider (e.g. provider=docker)"
        )
    missing = [b for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if missing:
        packages = " ".join(sorted({REQUIRED_BINARIES[b] for b in missing}))
        raise DesktopStartError(
            f"the local desktop needs {', '.join(missing)}: apt-get install -y --no-install-recommends {packages} "
            f"(or run {SETUP_HINT} as root for everything it uses)"
        )
    if not os.access(f"{DESKTOP_VENV}/bin/python", os.X_OK):
        raise DesktopStartError(f"the local desktop needs its Python at {DESKTOP_VENV}: run {SETUP_HINT}")


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


FIREWALL_CHAIN = "VERL_CUA_DESKTOP"
FIREWALL_TAG = "verl-cua-desktop"
BLOCKED_V4 = ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10")
BLOCKED_V6 = ("::1/128", "fc00::/7", "fe80::/10")


def _nameservers(v6: bool) -> list[str]:
    """The resolvers of /etc/resolv.conf of one address family (the desktop may always reach them on port 53)."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return []
    servers = [line.split()[1] for line in lines if line.startswith("nameserver") and len(line.split()) > 1]
    return [ns for ns in servers if (":" in ns) == v6]


class _Firewall:
    """iptables/ip6tables OUTPUT rules for the desktop user (chain VERL_CUA_DESKTOP, every rule tagged).

    Allowed: replies (ESTABLISHED/RELATED: the server answering the trainer), the resolvers on port 53, and each
    running desktop's internal CDP port on 127.0.0.1 (its relay connects there). Rejected: every other loopback
    (127.77.0.0/16 included: a service bound to 0.0.0.0 answers there too), private, CGNAT or link-local
    destination and any address of this host. The Internet stays reachable.

    A CDP rule names the process that opened it (`verl-cua-desktop:cdp:<pid>`); the first install in a process
    drops the rules of processes that are gone (a trainer killed before its desktops stopped), so no opening
    outlives its desktop's owner.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._installed: dict[str, bool] = {}
        self._warned = False

    @staticmethod
    def _run(tool: str, *args: str) -> bool:
        try:
            return subprocess.run([tool, "-w", "10", *args], capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    @staticmethod
    def _rules(v6: bool) -> list[list[str]]:
        tag = ["-m", "comment", "--comment", FIREWALL_TAG]
        rules = [["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", *tag, "-j", "ACCEPT"]]
        for ns in _nameservers(v6):
            rules += [["-d", ns, "-p", proto, "--dport", "53", *tag, "-j", "ACCEPT"] for proto in ("udp", "tcp")]
        rules.append(["-m", "addrtype", "--dst-type", "LOCAL", *tag, "-j", "REJECT"])
        rules += [["-d", net, *tag, "-j", "REJECT"] for net in (BLOCKED_V6 if v6 else BLOCKED_V4)]
        return rules

    @staticmethod
    def _cdp_owner(rule: list[str]) -> int | None:
        """The pid that opened a CDP rule (0 when the rule names none), None for any other rule."""
        comment = rule[rule.index("--comment") + 1] if "--comment" in rule[:-1] else ""
        if not comment.startswith(f"{FIREWALL_TAG}:cdp"):
            return None
        pid = comment.rpartition(":")[2]
        return int(pid) if pid.isdigit() else 0

    @staticmethod
    def _jump(uid: int) -> list[str]:
        return ["-m", "owner", "--uid-owner", str(uid), "-m", "comment", "--comment", FIREWALL_TAG, "-j",
                FIREWALL_CHAIN]  # fmt: skip

    def install(self, uid: int) -> bool:
        """Install the rules once per process (idempotent); False, with one warning line, when that is impossible."""
        with self._lock:
            for tool, v6 in (("iptables", False), ("ip6tables", True)):
                if tool not in self._installed:
                    self._installed[tool] = self._install(tool, v6, uid)
            ok = self._installed["iptables"]
            if not all(self._installed.values()) and not self._warned:
                self._warned = True
                missing = [t for t, done in self._installed.items() if not done]
                logger.warning(
                    "local desktop: no %s rules (%s); the desktops can reach this host's loopback and private "
                    "network services: apt-get install -y iptables",
                    "/".join(missing),
                    "not installed" if any(shutil.which(t) is None for t in missing) else "iptables failed",
                )
            return ok

    def _install(self, tool: str, v6: bool, uid: int) -> bool:
        if shutil.which(tool) is None:
            return False
        rules = self._rules(v6)
        if not self._run(tool, "-n", "-L", FIREWALL_CHAIN) and not self._run(tool, "-N", FIREWALL_CHAIN):
            return False
        try:
            listing = subprocess.run(
                [tool, "-w", "10", "-S", FIREWALL_CHAIN], capture_output=True, text=True, timeout=30
            ).stdout.splitlines()
        except (OSError, subprocess.TimeoutExpired):
            return False
        appended = [shlex.split(line)[2:] for line in listing if line.startswith("-A ")]
        from psutil import pid_exists

        owners = [self._cdp_owner(rule) for rule in appended]
        # live desktops' ports (this or another running process): kept; those of processes that are gone: dropped
        cdp = [rule for rule, pid in zip(appended, owners, strict=True) if pid and pid_exists(pid)]
        stale = sum(pid is not None for pid in owners) - len(cdp)
        exact = not stale and len(appended) - len(cdp) == len(rules)
        if not exact or not all(self._run(tool, "-C", FIREWALL_CHAIN, *rule) for rule in rules):
            self._run(tool, "-F", FIREWALL_CHAIN)
            if not all(self._run(tool, "-A", FIREWALL_CHAIN, *rule) for rule in [*cdp, *rules]):
                return False
        jump = self._jump(uid)
        return self._run(tool, "-C", "OUTPUT", *jump) or self._run(tool, "-I", "OUTPUT", "1", *jump)

    def allow_cdp(self, port: int) -> list[str] | None:
        """Let the desktop user reach 127.0.0.1:`port` (a desktop's internal CDP port); the rule, for `revoke`."""
        rule = ["-d", "127.0.0.1/32", "-p", "tcp", "--dport", str(port), "-m", "comment", "--comment",
                f"{FIREWALL_TAG}:cdp:{os.getpid()}", "-j", "ACCEPT"]  # fmt: skip
        with self._lock:
            if not self._installed.get("iptables") or not self._run("iptables", "-I", FIREWALL_CHAIN, "1", *rule):
                return None
        return rule

    def revoke(self, rule: list[str]) -> None:
        """Delete a rule `allow_cdp` added (every copy of it)."""
        with self._lock:
            for _ in range(10):
                if not self._run("iptables", "-D", FIREWALL_CHAIN, *rule):
                    break

    def uninstall(self, uid: int) -> None:
        """Remove the jump and the chain (for cleanup; running desktops lose their protection)."""
        with self._lock:
            for tool in ("iptables", "ip6tables"):
                if shutil.which(tool) is None:
                    continue
                while self._run(tool, "-D", "OUTPUT", *self._jump(uid)):
                    pass
                self._run(tool, "-F", FIREWALL_CHAIN)
                self._run(tool, "-X", FIREWALL_CHAIN)
            self._installed.clear()


FIREWALL = _Firewall()


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_below_auto_range(tries: int = 64) -> int:
    """A free 127.0.0.1 port below the kernel's `ip_local_port_range`, for the firewall to open: the kernel never
    hands such a port to a bind(0) or connect(), so a host service that asked for any port cannot sit on it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    start = max(1024, low - 8192)
    for _ in range(tries if low > start else 0):
        port = start + secrets.randbelow(low - start)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return _free_port()


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
_USER_LOCK = threading.Lock()


def _desktop_user() -> tuple[int, int]:
    """UID/GID of the dedicated system user the desktop runs as (created once; concurrent creators tolerated)."""
    with _USER_LOCK:
        try:
            entry = pwd.getpwnam(DESKTOP_USER)
        except KeyError:
            result = subprocess.run(
                ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                 "/usr/sbin/nologin", DESKTOP_USER],
                capture_output=True, text=True,
            )  # fmt: skip
            try:  # another process may have created it meanwhile (useradd then fails with "already exists")
                entry = pwd.getpwnam(DESKTOP_USER)
            except KeyError:
                raise DesktopStartError(
                    f"cannot create the desktop user {DESKTOP_USER}: {result.stderr.strip()[:200]}"
                ) from None
    if entry.pw_uid == 0:
        raise DesktopStartError(f"the desktop user {DESKTOP_USER} must not be root")
    return entry.pw_uid, entry.pw_gid


def hidden_paths() -> list[str]:
    """Paths the desktop must not see (project tree, launching user's HOME, working dir): the outermost ones only."""
    paths = {str(REPO_ROOT), os.path.realpath(os.getcwd()), os.path.realpath(os.path.expanduser("~"))}
    paths.discard("/")
    safe = {RUNTIME_ROOT.resolve(), Path(DESKTOP_VENV).resolve()}
    kept: list[Path] = []
    for p in sorted(paths):
        path = Path(p)
        if not path.is_dir():
            continue
        if path == Path("/tmp") or Path("/tmp") in path.parents:
            continue  # the desktop's /tmp is a private, empty tmpfs already
        needed = next((s for s in safe if s == path or path in s.parents), None)
        if needed is not None:  # fail closed: never leave it visible
            raise DesktopStartError(
                f"cannot hide {path} from the desktop: it holds {needed}, which the desktop needs; set "
                "VERL_CUA_DESKTOP_RUNTIME / VERL_CUA_DESKTOP_VENV to a directory outside it"
            )
        kept.append(path)
    # a path inside another hidden path is hidden already (and its mount point vanishes under the outer tmpfs)
    return [str(p) for p in kept if not any(q in p.parents for q in kept)]


class LocalDesktop:
    """One sandboxed desktop process tree; `address` is what OSWorld's provider interface returns.

    Thread-safe: start/stop/alive/pids hold one re-entrant lock (the pool may kill a desktop while another thread
    asks whether it is alive).
    """

    def __init__(self, *, screen: tuple[int, int] = (1920, 1080), start_timeout: float = 60.0):
        check_system()
        self.screen = screen
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.runtime: Path | None = None
        self._lock = threading.RLock()
        self._display_lock = None
        self._mntns = ""
        self._cdp_rule: list[str] | None = None
        self.display = self.port = self.cdp_port = None
        self.host = "127.0.0.1"
        self.token = ""

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Boot Xvfb, openbox, D-Bus and the server; return when the first screenshot is served."""
        with self._lock:
            self.stop()
            uid, gid = _desktop_user()
            hide = hidden_paths()
            self._allocate_display()
            _prune_stale_runtimes(self.display)
            self.host = f"127.77.{self.display // 256}.{self.display % 256}"
            self.port, self.cdp_port = _free_port(self.host), _free_port(self.host)
            self._cdp_internal = _port_below_auto_range()  # the one port the firewall opens to the desktop
            if FIREWALL.install(uid):
                self._cdp_rule = FIREWALL.allow_cdp(self._cdp_internal)
            self.token = secrets.token_hex(16)
            NETRC.add(self.host, self.token)
            RUNTIME_ROOT.mkdir(parents=True, exist_ok=True)
            os.chown(RUNTIME_ROOT, 0, 0)
            RUNTIME_ROOT.chmod(0o711)
            runtime = Path(tempfile.mkdtemp(prefix=f"d{self.display}-", dir=RUNTIME_ROOT))
            self.runtime = runtime
            self._prepare_runtime(runtime, uid, gid)
            argv = [*self._sandbox_prefix(uid, gid, hide), "/usr/bin/env", "-i", *self._environment(runtime)]
            argv += ["dbus-run-session", f"--config-file={runtime / 'dbus.conf'}", "--"]
            argv += [f"{DESKTOP_VENV}/bin/python", str(runtime / "server" / "desktop_server.py")]
            argv += ["--host", self.host, "--port", str(self.port), "--cdp-port", str(self.cdp_port)]
            argv += ["--display", f":{self.display}", "--screen", f"{self.screen[0]}x{self.screen[1]}"]
            argv += ["--home", str(runtime / "home"), "--template", str(runtime / "home_template")]
            log = open(runtime / "server.log", "wb")  # noqa: SIM115 - handed to the child
            os.chmod(runtime / "server.log", 0o600)
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True
            )  # the token goes over stdin: never in a file, argv or environment the desktop user can read
            log.close()
            try:  # stdin stays open as the desktop's lifeline: when this process dies, the server sees EOF and exits
                self.proc.stdin.write(f"{self.token}\n".encode())
                self.proc.stdin.flush()
            except OSError:
                pass  # the sandbox died at once: _wait_ready reports why
            self._wait_ready()

    def revert(self) -> None:
        """Kill every app and restore HOME (server-side); if the server does not answer, restart the desktop."""
        try:
            response = self.request("POST", "/_verl_cua/revert", timeout=60)
            response.raise_for_status()
            if response.json().get("left"):
                raise RuntimeError(f"processes survived the revert: {response.json()['left']}")
        except Exception as exc:
            logger.warning("local desktop :%s revert failed (%s); restarting it", self.display, exc)
            self.start()

    def stop(self) -> None:
        """Kill the whole desktop (its process tree and every process in its mount namespace), remove its runtime."""
        with self._lock:
            proc, self.proc = self.proc, None
            if proc is not None:
                _kill_all(proc.pid, self._mntns)
                if proc.stdin is not None:
                    try:
                        proc.stdin.close()
                    except OSError:
                        pass
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    logger.warning("local desktop :%s sandbox root %s did not exit", self.display, proc.pid)
                self._mntns = ""
            if self._cdp_rule is not None:
                FIREWALL.revoke(self._cdp_rule)
                self._cdp_rule = None
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
        with self._lock:
            proc = self.proc
            return proc is not None and proc.poll() is None

    def healthy(self) -> bool:
        """Whether the server answers and reports the server, Xvfb and openbox alive (each checked here too)."""
        if not self.alive():
            return False
        try:
            response = self.request("GET", "/_verl_cua/health", timeout=5)
            infra = response.json().get("infra") if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return False
        if not isinstance(infra, dict):
            return False
        import psutil

        for name in INFRA:
            pid = infra.get(name)
            try:
                if not isinstance(pid, int) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return False
            except psutil.NoSuchProcess:
                return False
        return True

    def pids(self) -> list[int]:
        """The sandbox process, every descendant (Xvfb, server, apps) and anything else in its mount namespace."""
        with self._lock:
            if self.proc is None:
                return []
            return [p.pid for p in _sandbox_processes(self.proc.pid, self._mntns)]

    # -- internals ------------------------------------------------------------------------------------------------
    def _allocate_display(self) -> None:
        RUNTIME_ROOT.mkdir(parents=True, exist_ok=True)
        for n in range(FIRST_DISPLAY, FIRST_DISPLAY + 1000):
            if _x_display_taken(n):
                continue
            lock = _lock_display(n)  # held for the desktop's life
            if lock is None:
                continue
            self.display, self._display_lock = n, lock
            return
        raise DesktopStartError("no free X display number in :100-:1099")

    def _prepare_runtime(self, runtime: Path, uid: int, gid: int) -> None:
        """Root-owned, read-only to the desktop user except home/ and xdg/ (its own); Xauthority root:desktop 0640."""
        runtime.chmod(0o755)
        (runtime / "server").mkdir(mode=0o755)
        for name in SERVER_FILES:
            shutil.copyfile(Path(__file__).with_name(name), runtime / "server" / name)
            (runtime / "server" / name).chmod(0o644)
        shutil.copytree(HOME_TEMPLATE, runtime / "home_template", symlinks=True)
        for path in [runtime / "home_template", *(runtime / "home_template").rglob("*")]:
            os.lchown(path, 0, 0)
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() or path.stat().st_mode & 0o100 else 0o644)
        (runtime / "bin").mkdir(mode=0o755)
        for name in BROWSERS:
            wrapper = runtime / "bin" / name
            wrapper.write_text(BROWSER_WRAPPER)
            wrapper.chmod(0o755)
        (runtime / "dbus.conf").write_text(DBUS_CONFIG)
        (runtime / "dbus.conf").chmod(0o644)
        for name in ("home", "xdg"):  # the only paths the desktop user owns
            (runtime / name).mkdir(mode=0o700)
            os.chown(runtime / name, uid, gid)
        cookie = secrets.token_hex(16)
        subprocess.run(
            ["xauth", "-f", str(runtime / "Xauthority"), "add", f":{self.display}", ".", cookie],
            check=True, capture_output=True,
        )  # fmt: skip
        os.chown(runtime / "Xauthority", 0, gid)
        (runtime / "Xauthority").chmod(0o640)

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

    @staticmethod
    def _sandbox_prefix(uid: int, gid: int, hide: list[str]) -> list[str]:
        """unshare a mount namespace, give it a private /tmp, hide `hide`, drop to the desktop user (fail closed)."""
        script = (
            f'fail() {{ echo "verl-cua sandbox: $1" >&2; exit {SANDBOX_FAILED}; }}; '
            'mount -t tmpfs -o mode=1777,size=2g verl-cua-tmp /tmp || fail "cannot mount a private /tmp"; '
            'while [ "$1" != -- ]; do mount -t tmpfs -o ro,mode=000,size=4k verl-cua-hidden "$1" '
            '|| fail "cannot hide $1 from the desktop"; shift; done; shift; exec "$@"'
        )
        drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs"]
        return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", *hide, "--",
                *drop]  # fmt: skip

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                response = self.request("GET", "/screenshot", timeout=5)
                if response.status_code == 200:
                    self._mntns = _mount_namespace(self.proc.pid)
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
        if rc == SANDBOX_FAILED:
            raise DesktopStartError(f"local desktop not started, its sandbox could not be set up{log}")
        raise DesktopStartError(f"local desktop did not start ({last}, exit {rc}){log}")

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


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


def _lock_display(n: int) -> TextIO | None:
    """The lock file of display :n, locked exclusively, or None when a desktop holds it."""
    lock = open(RUNTIME_ROOT / f"display-{n}.lock", "w")  # noqa: SIM115 - the caller keeps or closes it
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


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


def _mount_namespace(pid: int) -> str:
    """`mnt:[inode]` of a process, or "" when it is gone (or a zombie)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return ""


def _sandbox_processes(root_pid: int, mntns: str) -> list:
    """psutil.Process objects of the tree under `root_pid` plus every process in mount namespace `mntns`.

    A namespace member counts only if a process already known to be ours is still in that namespace after the
    scan (then the namespace was alive throughout and its inode number cannot have been reused).
    """
    import psutil

    procs: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(root_pid)
        for p in [root, *root.children(recursive=True)]:
            procs[p.pid] = p
    except psutil.NoSuchProcess:
        pass
    if mntns:
        members = [p for p in psutil.process_iter() if p.pid not in procs and _mount_namespace(p.pid) == mntns]
        if members and any(p.is_running() and _mount_namespace(p.pid) == mntns for p in list(procs.values())):
            procs.update({p.pid: p for p in members})
    return list(procs.values())


def _kill_all(root_pid: int, mntns: str, deadline_s: float = 10.0) -> None:
    """SIGTERM the sandbox's processes (objects taken up front: no PID reuse), then SIGKILL in rounds until none."""
    import psutil

    procs = _sandbox_processes(root_pid, mntns)
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(procs, timeout=3)
    deadline = time.monotonic() + deadline_s
    while True:  # a new round also catches what forked (or was orphaned to init) since the last snapshot
        known = {p.pid: p for p in alive}
        for p in _sandbox_processes(root_pid, mntns):
            known.setdefault(p.pid, p)
        alive = [p for p in known.values() if _running(p)]
        if not alive or time.monotonic() > deadline:
            break
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        _gone, alive = psutil.wait_procs(alive, timeout=1)
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
