"""The agent's side of a local desktop: every process that runs as the desktop's user is started here.

Runs inside the desktop next to desktop_server.py (imports nothing from verl-cua), as the desktop's user, in the
agent's cgroup. The server runs as another user (root mode) that the agent's processes cannot see, signal or trace;
it asks this launcher, over a socket pair only the two of them hold, to start what must be the agent's own: the
session bus and the window manager, a task's setup commands and apps, the agent's actions, the accessibility walk.
Each request is one JSON message (SOCK_SEQPACKET) with the child's stdio as file descriptors; the launcher answers
with the child's pid and reports every exit. It is the agent's subreaper: orphans of the agent come back to it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
MAX_MESSAGE = 4 << 20  # one request (argv, environment) at most
X_LIBRARIES = ("/libxcb.so", "/libX11.so")  # a process that maps one of them is an X client (will show a window)


class Launcher:
    """Start, kill and reap the agent's processes for the server on the other end of `sock`."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.send_lock = threading.Lock()
        self.children: dict[int, subprocess.Popen] = {}  # kept so that Python never reaps them: the reaper does

    def send(self, message: dict) -> None:
        """One message to the server (a reply or an exit event)."""
        with self.send_lock:
            self.sock.send(json.dumps(message).encode())

    def serve(self) -> None:
        """Answer requests until the server closes its end (then the desktop is ending)."""
        threading.Thread(target=self.reap, daemon=True).start()
        while True:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_MESSAGE, 3)
            if not data:
                return
            threading.Thread(target=self.handle, args=(data, fds), daemon=True).start()

    def handle(self, data: bytes, fds: list[int]) -> None:
        """Run one request; its reply carries the request's id."""
        request: dict = {}
        try:
            request = json.loads(data)
            reply = getattr(self, "op_" + str(request.get("op")))(request, fds)
        except Exception as exc:  # a failed spawn is the caller's answer, never the launcher's end
            reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.send({"id": request.get("id"), **reply})

    def op_spawn(self, request: dict, fds: list[int]) -> dict:
        """Start a process as the desktop's user with the given stdio (the rest /dev/null), in a session of its own."""
        received = iter(fds)
        stdio = [next(received) if attached else subprocess.DEVNULL for attached in request["stdio"]]
        command = request["command"]
        proc = subprocess.Popen(
            command, shell=bool(request.get("shell")), cwd=request.get("cwd") or "/", env=request["env"],
            stdin=stdio[0], stdout=stdio[1], stderr=stdio[2], start_new_session=True,
        )  # fmt: skip
        self.children[proc.pid] = proc
        return {"pid": proc.pid}

    def op_kill(self, request: dict, _fds) -> dict:
        """SIGKILL a process, its process group and every descendant."""
        kill_tree(int(request["pid"]))
        return {"ok": True}

    def op_maps_x(self, request: dict, _fds) -> dict:
        """Which of `pids` map an X client library (are, or are about to be, GUI apps)."""
        return {"pids": [pid for pid in request["pids"] if maps_x(int(pid))]}

    def reap(self) -> None:
        """Reap every child and orphan; report each exit to the server."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.05)
                continue
            self.children.pop(pid, None)
            try:
                self.send({"event": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)})
            except OSError:
                return


class LauncherClient:
    """The server's end: requests with stdio fds, replies by id, exit codes by pid (kept until collected)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.lock = threading.Condition()
        self.replies: dict[int, dict] = {}
        self.exits: dict[int, int] = {}
        self.next_id = 0
        self.gone = False
        self.on_exit = None  # callable(pid, code): the setup tracker's

    def start(self) -> None:
        """Read replies and exit events in a daemon thread."""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                with self.lock:
                    self.gone = True
                    self.lock.notify_all()
                return
            message = json.loads(data)
            with self.lock:
                if message.get("event") == "exit":
                    self.exits[message["pid"]] = message["code"]
                    if len(self.exits) > 4096:  # nobody collects most exits (apps, helpers of apps)
                        self.exits.pop(next(iter(self.exits)))
                else:
                    self.replies[message["id"]] = message
                self.lock.notify_all()
            if message.get("event") == "exit" and self.on_exit is not None:
                self.on_exit(message["pid"], message["code"])

    def call(self, op: str, fds: tuple[int, ...] = (), timeout: float = 30.0, **fields) -> dict:
        """One request; its reply (RuntimeError when the launcher is gone or answers with an error)."""
        with self.lock:
            self.next_id += 1
            rid = self.next_id
        data = json.dumps({"id": rid, "op": op, **fields}).encode()
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"request over {MAX_MESSAGE} bytes")
        socket.send_fds(self.sock, [data], list(fds))
        deadline = time.monotonic() + timeout
        with self.lock:
            while rid not in self.replies:
                left = deadline - time.monotonic()
                if self.gone or left <= 0:
                    raise RuntimeError("the desktop's launcher is gone" if self.gone else f"no answer to {op}")
                self.lock.wait(left)
            reply = self.replies.pop(rid)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply

    def spawn(self, command, *, shell: bool, env: dict, cwd: str = "/", stdin=None, stdout=None, stderr=None) -> int:
        """Start `command` as the desktop's user; `stdin`/`stdout`/`stderr`: fds to hand it (None: /dev/null)."""
        stdio = [stdin, stdout, stderr]
        fds = tuple(fd for fd in stdio if fd is not None)
        reply = self.call("spawn", fds, command=command, shell=shell, env=env, cwd=cwd,
                          stdio=[fd is not None for fd in stdio])  # fmt: skip
        return int(reply["pid"])

    def wait(self, pid: int, timeout: float) -> int | None:
        """The exit code of `pid` once it exits (None: still running after `timeout` s, or the launcher gone)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while pid not in self.exits:
                left = deadline - time.monotonic()
                if self.gone or left <= 0:
                    return None
                self.lock.wait(left)
            return self.exits.pop(pid)

    def kill(self, pid: int) -> None:
        """SIGKILL `pid`, its group and its descendants (nothing when the launcher is gone)."""
        try:
            self.call("kill", pid=pid, timeout=10)
        except RuntimeError:
            pass

    def maps_x(self, pids: list[int]) -> set[int]:
        """Which of `pids` are X clients."""
        try:
            return set(self.call("maps_x", pids=list(pids), timeout=10)["pids"])
        except RuntimeError:
            return set()


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state) of every process, from /proc/*/stat (children of any thread have the process as ppid)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            table[int(name)] = (int(fields[1]), fields[0])
        except (OSError, IndexError, ValueError):
            continue
    return table


def descendants(pid: int) -> list[int]:
    """Every descendant of `pid` (one snapshot of the process table)."""
    children: dict[int, list[int]] = {}
    for child, (ppid, _state) in process_table().items():
        children.setdefault(ppid, []).append(child)
    out, stack = [], list(children.get(pid, []))
    while stack:
        child = stack.pop()
        out.append(child)
        stack.extend(children.get(child, []))
    return out


def maps_x(pid: int) -> bool:
    """Whether process `pid` has an X client library mapped."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any(lib in line for line in f for lib in X_LIBRARIES)
    except OSError:
        return False


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`, every descendant and its process group (what is gone or not ours is skipped)."""
    for target in [pid, *descendants(pid)]:
        _signal(target, signal.SIGKILL)
    _signal(-pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def populate_home(template: str, target: str) -> None:
    """HOME (an empty tmpfs of this sandbox) as a copy of the template, private to the desktop's user."""
    os.makedirs(target, exist_ok=True)
    shutil.copytree(template, target, symlinks=True, dirs_exist_ok=True)
    os.chmod(target, 0o700)  # copytree copied the template root's mode; HOME is private


def main() -> None:
    """Populate HOME, then serve the server's requests on --socket-fd."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket-fd", type=int, required=True)
    parser.add_argument("--home", required=True)
    parser.add_argument("--template", required=True)
    args = parser.parse_args()
    libc = ctypes.CDLL(None)
    # not dumpable: the agent (the same user) cannot trace it or take its socket to the server from /proc
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    os.umask(0o077)  # the agent's files are its own (the server reads them with CAP_DAC_READ_SEARCH)
    populate_home(args.template, args.home)
    if xdg := os.environ.get("XDG_RUNTIME_DIR"):  # the agent's: the session bus listens there
        os.makedirs(xdg, mode=0o700, exist_ok=True)
    sock = socket.socket(fileno=args.socket_fd)
    Launcher(sock).serve()


if __name__ == "__main__":
    main()
