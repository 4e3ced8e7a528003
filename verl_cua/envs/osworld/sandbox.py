"""The local desktop's sandbox: a bubblewrap command line, the desktop's identity, its limits and its keeper.

Each desktop runs in its own PID, IPC, UTS, mount and network namespaces (bubblewrap, Debian's `bubblewrap`).
Its filesystem is an allow-list: read-only system dirs (/usr, /etc with our passwd), the desktop's own Python,
its read-only runtime files, one socket dir it shares with the host, and size-limited tmpfs mounts for /home,
/tmp, /dev/shm, /var/tmp, /run/lock and the XDG runtime dir. Its network namespace holds loopback only.

As root, each desktop gets two uids of its own (no passwd entry on the host): the agent's (`UID_BASE` + slot),
with cgroup limits on pids, memory and CPU (v1 or v2), and the machinery's (`UID_BASE` + `MACHINERY_OFFSET` +
slot), under which the server, Xvfb and every evaluator command run, in cgroups of their own, invisible to the
agent (`stage`: /proc with hidepid). Without root, bubblewrap's user namespace maps the desktop's user to the
caller's uid (rootless: namespaces and rlimits, one uid, no cgroup). Either way the process count is bounded by
RLIMIT_NPROC too, and the keyring syscalls are denied (`keyring_filter`).

A keeper (a root-side shell outside the sandbox, which the desktop cannot see or signal) starts bubblewrap with
`--die-with-parent` and then becomes `cat` on the owner's pipe: when the owner closes it or dies, however killed,
`cat` exits, bubblewrap gets SIGKILL, then its namespace's init, and the kernel kills every process in the PID
namespace. The infra binaries (Xvfb, openbox, D-Bus) run from execute-only copies, which makes them non-dumpable:
the agent, the same user inside, cannot ptrace them or write their memory to outlive a revert.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shlex
import shutil
import subprocess
from pathlib import Path

logger = logging.getLogger(__name__)

UID_BASE = int(os.environ.get("VERL_CUA_DESKTOP_UID_BASE", "1900000000"))  # root mode: uid = UID_BASE + slot
MACHINERY_OFFSET = 1 << 20  # root mode: the server's own uid = UID_BASE + MACHINERY_OFFSET + slot
ROOTLESS_UID = 1000  # the desktop user's uid inside a rootless sandbox (the caller's uid outside)
HOSTNAME = "verl-cua-desktop"  # the sandbox's own (UTS namespace): the host's name is not shown
HOME = "/home/user"  # OSWorld's VM user is `user` with this HOME
XDG_RUNTIME = "/run/user/1000"  # as on OSWorld's VM (tasks name /run/user/1000/bus), whatever the desktop's uid
PUB = "/run/verl-cua"  # the runtime files, read-only inside
SOCK = "/run/verl-cua-sock"  # the egress proxy's socket (read-only), when egress is on
INFRA_DIR = "/run/verl-cua-infra"  # execute-only copies of the infra binaries
INFRA_BINARIES = ("Xvfb", "openbox", "dbus-daemon")
EMPTY = "/run/verl-cua-empty"  # the empty top layer of the read-only overlays
STAGE_FAILED = 97  # the sandbox's root stage could not mount its /proc or overlays
CGROUP_FAILED = 98  # the keeper's exit status when it cannot join its cgroups
GiB, MiB = 1 << 30, 1 << 20
# The keeper (bash): join the cgroups ($0, colon-separated cgroup.procs files), start bubblewrap (its stdin is
# /dev/null), then wait on the owner's pipe, holding none of the fds handed to the sandbox (a listening socket kept
# open here would leave the host's clients queued on a dead server). bubblewrap dies with it (--die-with-parent).
KEEPER = 'IFS=:; for p in $0; do [ -z "$p" ] || echo $$ > "$p" || exit 98; done; unset IFS; "$@" & exec cat >/dev/null'


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one desktop may consume; reaching a limit fails the agent's command, never the host."""

    pids: int = 2048  # tasks (threads count), cgroup pids.max and RLIMIT_NPROC
    memory: int = 4 * GiB  # cgroup memory limit (tmpfs pages written by the desktop included)
    home: int = 2 * GiB  # tmpfs sizes
    tmp: int = 1 * GiB
    shm: int = 256 * MiB
    var_tmp: int = 256 * MiB
    max_file: int = 64 * MiB  # largest file the evaluators may fetch from the desktop
    max_output: int = 1 * MiB  # stdout/stderr kept per command
    max_log: int = 1 * MiB  # the desktop's log on the host (server, Xvfb, openbox): the rest is dropped
    cpus: float = 1.0  # cgroup CPU quota, in CPUs: one desktop's busy loops cannot starve the others

    @classmethod
    def from_env(cls) -> Limits:
        """Defaults overridden by VERL_CUA_DESKTOP_<FIELD> (bytes or a count; CPUS a number such as 1.5), e.g.
        VERL_CUA_DESKTOP_MEMORY=8G."""
        values = {}
        for field in dataclasses.fields(cls):
            name = f"VERL_CUA_DESKTOP_{field.name.upper()}"
            raw = os.environ.get(name)
            if raw:
                values[field.name] = parse_cpus(raw, name) if field.name == "cpus" else parse_size(raw, name)
        return cls(**values)


def parse_cpus(raw: str, name: str) -> float:
    """A positive number of CPUs (`1`, `0.5`, `4`); one-line error otherwise."""
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{name}={raw!r}: expected a positive number of CPUs such as 1, 0.5 or 4")
    return value


def parse_size(raw: str, name: str) -> int:
    """`8G`, `512M`, `64K` or a plain integer; one-line error otherwise."""
    units = {"K": 1 << 10, "M": MiB, "G": GiB}
    text = raw.strip().upper().removesuffix("B").removesuffix("I")
    scale = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    if not number.isdigit() or int(number) <= 0:
        raise ValueError(f"{name}={raw!r}: expected a positive size such as 4G, 512M or 2048")
    return int(number) * scale


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who the desktop runs as: the agent's uid and gid inside the sandbox, the server's (`machinery`: the same
    rootless), and whether bubblewrap maps them (rootless)."""

    uid: int
    gid: int
    rootless: bool
    machinery: int = -1  # root mode: the uid (and gid) of the server and every command it runs for the host

    @property
    def split(self) -> bool:
        """Whether the server runs under an identity of its own (root mode)."""
        return not self.rootless and self.machinery >= 0


def identity(slot: int) -> Identity:
    """Root: two uids of their own per desktop, the agent's and the server's (no passwd entry on the host);
    otherwise a user namespace, one uid for both."""
    if os.geteuid() != 0:
        return Identity(ROOTLESS_UID, ROOTLESS_UID, rootless=True)
    import pwd

    uid, machinery = UID_BASE + slot, UID_BASE + MACHINERY_OFFSET + slot
    for candidate in (uid, machinery):
        try:
            owner = pwd.getpwuid(candidate).pw_name
        except KeyError:
            continue
        raise RuntimeError(f"uid {candidate} belongs to {owner}: set VERL_CUA_DESKTOP_UID_BASE to a free range")
    return Identity(uid, uid, rootless=False, machinery=machinery)


@functools.lru_cache(maxsize=1)
def rootless_supported() -> str:
    """ "" when this user can build a rootless sandbox, else why not (one line)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is missing"
    probe = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "--", "true"]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed: {exc}"
    if result.returncode != 0:
        return f"unprivileged user namespaces are off ({result.stderr.strip()[:160]})"
    return ""


# -- cgroups -------------------------------------------------------------------------------------------------------
CGROUP_ROOT = Path("/sys/fs/cgroup")


CPU_PERIOD_US = 100_000  # the CFS period the CPU quota is a share of


def create_cgroups(name: str, limits: Limits) -> list[Path]:
    """Cgroup dirs limiting pids, memory and CPU (v2 when mounted, else the v1 pids, memory and cpu controllers).

    Returns the `cgroup.procs` files to join; [] with one warning when cgroups cannot be used (not root, no
    controller): then only RLIMIT_NPROC and the tmpfs sizes bound the desktop.
    """
    if os.geteuid() != 0:
        return []
    quota = _quota_us(limits)
    try:
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            parent = CGROUP_ROOT / "verl-cua"
            parent.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):  # needs the root's subtree_control to allow them
                (CGROUP_ROOT / "cgroup.subtree_control").write_text("+pids +memory +cpu")
            (parent / "cgroup.subtree_control").write_text("+pids +memory +cpu")
        return _cgroups(
            name,
            {"pids.max": limits.pids, "memory.max": limits.memory, "cpu.max": f"{quota} {CPU_PERIOD_US}"},
            {"pids": {"pids.max": limits.pids}, "memory": {"memory.limit_in_bytes": limits.memory},
             "cpu": {"cpu.cfs_period_us": CPU_PERIOD_US, "cpu.cfs_quota_us": quota}},
            optional={"memory.swap.max": 0},
        )  # fmt: skip
    except OSError as exc:
        warn_once(f"local desktop: no cgroup limits ({exc}); pids are bounded by RLIMIT_NPROC, memory and CPU are not")
        remove_cgroups(name)
        return []


MACHINERY_MEMORY = 2 * GiB  # the server, Xvfb and the evaluator's commands
MACHINERY_PIDS = 512
MACHINERY_SHARES = 4096  # 4x a default group's CPU weight: the server's commands get the CPU the agent's do not


def create_machinery_cgroups(name: str, limits: Limits) -> list[Path]:
    """The server's own cgroups (root mode), beside the agent's (`create_cgroups` made the parents): its own memory
    and pids, a CPU quota of its own and 4x the CPU weight, so screenshots and the evaluator's commands run however
    busy or frozen the agent's cgroup is. Returns the `cgroup.procs` files ([] when cgroups cannot be used)."""
    if os.geteuid() != 0:
        return []
    quota = _quota_us(limits)
    try:
        return _cgroups(
            f"{name}-machinery",
            {"pids.max": MACHINERY_PIDS, "memory.max": MACHINERY_MEMORY, "cpu.max": f"{quota} {CPU_PERIOD_US}",
             "cpu.weight": MACHINERY_SHARES * 100 // 1024},
            {"pids": {"pids.max": MACHINERY_PIDS}, "memory": {"memory.limit_in_bytes": MACHINERY_MEMORY},
             "cpu": {"cpu.cfs_period_us": CPU_PERIOD_US, "cpu.cfs_quota_us": quota, "cpu.shares": MACHINERY_SHARES}},
        )  # fmt: skip
    except OSError as exc:
        warn_once(f"local desktop: no cgroup of its own for the server ({exc}); it shares the agent's")
        return []


def _cgroups(own: str, v2: dict, v1: dict[str, dict], optional: dict | None = None) -> list[Path]:
    """Make the cgroup `verl-cua/<own>` with the given files (v2 when mounted, else one dir per v1 controller);
    its `cgroup.procs` files. `optional`: v2 files written if the kernel has them."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        group = CGROUP_ROOT / "verl-cua" / own
        group.mkdir(exist_ok=True)
        for file, value in v2.items():
            (group / file).write_text(str(value))
        for file, value in (optional or {}).items():
            with contextlib.suppress(OSError):
                (group / file).write_text(str(value))
        return [group / "cgroup.procs"]
    procs = []
    for controller, files in v1.items():
        group = CGROUP_ROOT / controller / "verl-cua" / own
        group.mkdir(parents=True, exist_ok=True)
        for file, value in files.items():
            (group / file).write_text(str(value))
        procs.append(group / "cgroup.procs")
    return procs


def join_cgroups(procs: list[Path], pids: list[int]) -> None:
    """Move processes (every thread of each) into the cgroups whose `cgroup.procs` files are given; one warning
    when one could not be moved."""
    for path in procs:
        for pid in pids:
            try:
                path.write_text(str(pid))
            except OSError as exc:
                warn_once(f"local desktop: the server could not move into its own cgroup {path.parent} ({exc})")


def _quota_us(limits: Limits) -> int:
    return max(1000, round(limits.cpus * CPU_PERIOD_US))


def remove_cgroups(name: str) -> None:
    """Remove the desktop's cgroup dirs, the agent's and the server's (their processes must be gone)."""
    for own in (name, f"{name}-machinery"):
        v1 = (CGROUP_ROOT / c / "verl-cua" / own for c in ("pids", "memory", "cpu"))
        for group in (CGROUP_ROOT / "verl-cua" / own, *v1):
            with contextlib.suppress(OSError):
                group.rmdir()


def cgroup_usage(procs: list[Path]) -> dict[str, int]:
    """`{pids, memory}` now in use by the desktop's cgroups (what the limits test and the bench read)."""
    usage = {}
    for path in procs:
        group = path.parent
        for key, files in (("pids", ("pids.current",)), ("memory", ("memory.current", "memory.usage_in_bytes"))):
            for file in files:
                with contextlib.suppress(OSError, ValueError):
                    usage[key] = int((group / file).read_text())
    return usage


@functools.cache
def warn_once(message: str) -> None:
    """Log `message` as a warning the first time only."""
    logger.warning(message)


# -- infra binaries --------------------------------------------------------------------------------------------------
def infra_binaries(root: Path) -> Path:
    """Execute-only (0111) copies of Xvfb, openbox and D-Bus under `root`/infra, refreshed when the source changes.

    A process started from a file its user cannot read is not dumpable: the agent cannot ptrace it or write its
    memory through /proc, so it cannot plant code in the desktop's infrastructure to survive a revert.
    """
    out = root / "infra"
    out.mkdir(mode=0o755, exist_ok=True)
    for name in INFRA_BINARIES:
        source = Path(shutil.which(name) or f"/usr/bin/{name}").resolve()
        target = out / name
        st = source.stat()
        with contextlib.suppress(OSError):
            have = target.stat()
            if have.st_size == st.st_size and int(have.st_mtime) == int(st.st_mtime) and have.st_mode & 0o777 == 0o111:
                continue
        staging = out / f".{name}.{os.getpid()}"
        shutil.copyfile(source, staging)
        os.utime(staging, (st.st_atime, st.st_mtime))
        staging.chmod(0o111)
        staging.replace(target)
    return out


# -- the command line ------------------------------------------------------------------------------------------------
def _parents(path: str) -> list[str]:
    """`--dir` each ancestor of `path` world-readable (bubblewrap as root would make them 0700)."""
    parts = Path(path).parts[1:-1]
    return [arg for i in range(len(parts)) for arg in ("--perms", "0755", "--dir", "/" + "/".join(parts[: i + 1]))]


def _system_binds() -> list[str]:
    """Read-only system dirs; the merged-/usr symlinks recreated as symlinks."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{top}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{top}"]
    args += ["--ro-bind", "/etc", "/etc"]
    args += ["--perms", "0755", "--dir", "/var", "--perms", "0755", "--dir", "/var/lib"]
    args += ["--perms", "0755", "--dir", "/var/cache"]
    for extra in ("/var/lib/dbus", "/var/cache/fontconfig"):
        args += ["--ro-bind-try", extra, extra]
    return args


def bwrap_argv(
    *, ident: Identity, runtime: Path, infra: Path, venv: str, limits: Limits, info_fd: int, server: list[str],
    launcher: list[str], pair: tuple[int, int], seccomp_fd: int | None = None, proxy_socket: Path | None = None,
    servers_only: tuple[int, ...] = (),
) -> list[str]:  # fmt: skip
    """bubblewrap's command line for one desktop: its root stage (`stage`) starts `launcher` as the agent's user
    and `server` as the server's, joined by the socket pair `pair` (launcher's end, server's end).

    Nothing of the host is writable inside: the server's sockets come in as file descriptors, and the egress
    proxy's socket (`proxy_socket`, when given) is bound read-only at SOCK/proxy.sock (connecting needs no write).
    `seccomp_fd`: a filter bubblewrap installs for every process of the sandbox (`keyring_filter`).
    """
    args = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if ident.rootless:
        args += ["--unshare-user", "--uid", str(ident.uid), "--gid", str(ident.gid)]
    args += ["--die-with-parent", "--new-session", "--hostname", HOSTNAME, "--info-fd", str(info_fd)]
    args += _system_binds()
    args += ["--ro-bind", str(runtime / "pub" / "passwd"), "/etc/passwd"]
    args += ["--ro-bind", str(runtime / "pub" / "group"), "/etc/group"]
    venv_real = str(Path(venv).resolve())
    args += [*_parents(venv_real), "--ro-bind", venv_real, venv_real]
    if venv_real != venv:
        args += [*_parents(venv), "--symlink", venv_real, venv]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for path, size in (("/tmp", limits.tmp), ("/dev/shm", limits.shm), ("/var/tmp", limits.var_tmp),
                       ("/home", limits.home)):  # fmt: skip
        args += ["--perms", "1777", "--size", str(size), "--tmpfs", path]
    args += ["--perms", "0755", "--tmpfs", "/run"]
    args += ["--perms", "1777", "--size", str(8 * MiB), "--tmpfs", "/run/lock"]
    args += ["--perms", "1777", "--size", str(64 * MiB), "--tmpfs", "/run/user"]
    args += ["--ro-bind", str(runtime / "pub"), PUB, "--ro-bind", str(infra), INFRA_DIR]
    args += ["--perms", "0755", "--dir", EMPTY]
    if proxy_socket is not None:
        args += ["--perms", "0755", "--dir", SOCK, "--ro-bind", str(proxy_socket), f"{SOCK}/proxy.sock"]
    args += ["--chdir", "/"]
    return [*args, "--", "/bin/bash", "-c", stage(ident, limits, server, launcher, pair, servers_only)]


def stage(
    ident: Identity, limits: Limits, server: list[str], launcher: list[str], pair: tuple[int, int],
    servers_only: tuple[int, ...] = (),
) -> str:  # fmt: skip
    """The sandbox's first shell, bash (as root in root mode, before any agent process exists).

    Root mode: /proc remounted with `hidepid=invisible` (the agent sees only its own processes; the server's group
    sees all), /usr and /etc as read-only overlays (inodes of their own: no inotify watch inside sees the host use
    them), then the launcher as the agent's uid with no capability, and the server as its own uid with only
    CAP_DAC_READ_SEARCH (it and the evaluator's commands read the agent's files). Rootless: both as the one user.
    `servers_only`: fds handed to the sandbox that the launcher must not hold (the token pipe, the listeners).
    """
    launcher_fd, server_fd = pair
    nproc = ["prlimit", f"--nproc={limits.pids}:{limits.pids}", "--"]
    lines, agent, machinery = [], [], []
    if ident.split:  # bubblewrap runs as root here: drop to each identity, every other capability and privilege
        m = ident.machinery
        lines += [f"mount -o remount,hidepid=invisible,gid={m} /proc || exit {STAGE_FAILED}"]
        lines += [f"mount -t overlay verl-cua-usr -o ro,lowerdir=/usr:{EMPTY} /usr || exit {STAGE_FAILED}"]
        lines += [f"mount -t overlay verl-cua-etc -o ro,lowerdir={PUB}/etc:/etc /etc || exit {STAGE_FAILED}"]
        agent = ["setpriv", f"--reuid={ident.uid}", f"--regid={ident.gid}", "--clear-groups", "--no-new-privs",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]  # fmt: skip
        caps = "-all,+dac_read_search"
        machinery = ["setpriv", f"--reuid={m}", f"--regid={m}", "--clear-groups", "--no-new-privs",
                     f"--inh-caps={caps}", f"--ambient-caps={caps}", f"--bounding-set={caps}", "--"]  # fmt: skip
    closed = "".join(f" {int(fd)}<&-" for fd in (server_fd, *servers_only))
    lines += [f"{shlex.join([*nproc, *agent, *launcher])}{closed} &"]
    lines += [f"exec {shlex.join([*nproc, *machinery, *server])} --launcher-pid $! {int(launcher_fd)}<&-"]
    return "\n".join(lines)


# -- the keyring and file-handle syscalls, denied ------------------------------------------------------------------
# (audit arch, add_key, request_key, keyctl, open_by_handle_at) of the ABIs a desktop's process may call; x32
# (nr | 0x40000000) denied. open_by_handle_at with CAP_DAC_READ_SEARCH (the server's) would open any file of a host
# filesystem a bind mount shows, by handle, past every mount of the sandbox.
DENIED_SYSCALLS = {
    "x86_64": ((0xC000003E, 248, 249, 250, 304), (0x40000003, 286, 287, 288, 342)),  # x86_64, i386
    "aarch64": ((0xC00000B7, 217, 218, 219, 265), (0x40000028, 309, 310, 311, 371)),  # aarch64, arm
}
ENOSYS = 38


def keyring_filter(machine: str | None = None) -> bytes:
    """A seccomp BPF program: add_key, request_key, keyctl and open_by_handle_at fail with ENOSYS (as on a kernel
    without them), every other call is allowed. Kernel keyrings belong to a uid and outlive its processes, so nothing
    of them may be made inside a desktop; a file handle would reach past the sandbox's mounts. A call of an unknown
    ABI fails too."""
    import struct

    abis = DENIED_SYSCALLS.get(machine or os.uname().machine)
    if abis is None:
        raise RuntimeError(f"no keyring filter for {machine or os.uname().machine}")
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | ENOSYS
    code: list[tuple] = [(ld, "", "", 4)]  # the arch
    for i, (arch, *_nrs) in enumerate(abis):
        code.append((jeq, f"abi{i}", "", arch))
    code.append((ret, "", "", deny))
    for i, (_arch, *nrs) in enumerate(abis):
        code.append(("label", f"abi{i}"))
        code.append((ld, "", "", 0))  # the call's number
        if i == 0 and abis[0][0] == 0xC000003E:
            code.append((jge, "deny", "", 0x40000000))
        code.extend((jeq, "deny", "", nr) for nr in nrs)
        code.append((ret, "", "", allow))
    code.append(("label", "deny"))
    code.append((ret, "", "", deny))
    labels, index = {}, 0
    for op in code:
        if op[0] == "label":
            labels[op[1]] = index
        else:
            index += 1
    out, index = b"", 0
    for op in code:
        if op[0] == "label":
            continue
        op_code, true, false, k = op
        jt = labels[true] - index - 1 if true else 0
        jf = labels[false] - index - 1 if false else 0
        out += struct.pack("<HBBI", op_code, jt, jf, k)
        index += 1
    return out


# the calling uid's user, user-session and persistent keyrings given back their owner's permissions (SETPERM), emptied
# (CLEAR) and checked empty (READ returns the size of the list of key ids; a keyring it cannot read counts as not
# empty): exit 3 when one is not.
CLEAR_KEYRINGS = (
    "import ctypes, platform, sys\nlibc = ctypes.CDLL(None)\nnr = {'x86_64': 250, 'aarch64': 219}[platform.machine()]\n"
    "persistent = libc.syscall(nr, 22, -1, -2)\nleft = 0\n"
    "for ring in [-4, -5] + [persistent] * (persistent > 0):\n"
    "    libc.syscall(nr, 5, ring, 0x3F3F0000)\n    libc.syscall(nr, 7, ring)\n"
    "    size = libc.syscall(nr, 11, ring, None, 0)\n    left += size if size >= 0 else 1\n"
    "sys.exit(3 if left else 0)\n"
)


def has_keys(uid: int) -> bool:
    """Whether the kernel holds any key of `uid` (it is listed in /proc/key-users). No process in a desktop can make
    keys (keyring_filter), so a listed desktop uid was used by an older version, or by something else."""
    try:
        with open("/proc/key-users") as f:
            return any(line.split(":", 1)[0].strip() == str(uid) for line in f)
    except OSError:
        return False


def clear_keyrings(ident: Identity) -> bool:
    """Empty the kernel keyrings of the desktop's uid (root mode: they outlive its processes and would reach the next
    desktop in the slot; rootless desktops get fresh ones with each user namespace). False, with one error line, when
    keys are left that cannot be cleared (a keyring whose permissions its owner took away, before the keyring calls
    were denied): the slot must not be used."""
    if ident.rootless or os.geteuid() != 0 or not has_keys(ident.uid):
        return True  # nothing to clear: and no keyring is made just to look (the check itself would make one)
    try:
        result = subprocess.run(["/usr/bin/python3", "-S", "-c", CLEAR_KEYRINGS], user=ident.uid, group=ident.gid,
                                extra_groups=[], timeout=10, capture_output=True, cwd="/")  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        logger.error("local desktop: the keyrings of uid %d were not cleared (%s)", ident.uid, exc)
        return False
    if result.returncode != 0:
        logger.error(
            "local desktop: the keyrings of uid %d are not empty after clearing (exit %d): its slot is not "
            "used (keys of an earlier desktop would reach the next one)",
            ident.uid,
            result.returncode,
        )
        return False
    return True


def keeper_argv(cgroup_procs: list[Path], argv: list[str], handed: tuple[int, ...] = ()) -> list[str]:
    """The keeper's command line around bubblewrap's (see KEEPER); `handed`: the fds it passes on and then closes."""
    script = KEEPER + "".join(f" {int(fd)}<&-" for fd in handed)
    return ["/bin/bash", "-c", script, ":".join(str(p) for p in cgroup_procs), *argv]


def passwd_files(ident: Identity) -> tuple[str, str]:
    """/etc/passwd and /etc/group inside the sandbox: root and the desktop's `user`."""
    passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    passwd += f"user:x:{ident.uid}:{ident.gid}:verl-cua desktop:{HOME}:/bin/bash\n"
    group = f"root:x:0:\nuser:x:{ident.gid}:\n"
    if ident.split:
        passwd += f"verl-cua:x:{ident.machinery}:{ident.machinery}:verl-cua desktop server:/:/usr/sbin/nologin\n"
        group += f"verl-cua:x:{ident.machinery}:\n"
    return passwd, group
