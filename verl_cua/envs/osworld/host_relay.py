"""Host-side TCP openings to a sandboxed desktop's unix sockets (its server, Chromium's CDP).

The desktop has no network route to the host and the host none into the desktop: its server and its CDP relay
accept on unix sockets the host made in its own runtime dir and handed to the server as file descriptors (no path
of them exists inside, so the desktop's user cannot put a server of its own in their place). OSWorld's client
speaks HTTP to `ip:port`, so the host opens a TCP listener on the desktop's own loopback address and pipes each
connection to the socket. Only processes of this host user (the trainer, its Ray workers) may connect: the peer's
uid is looked up in /proc/net/tcp; any other local user is refused before a byte reaches the desktop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading

logger = logging.getLogger(__name__)


def _hex_endpoint(address: tuple[str, int]) -> str:
    """`0100007F:1F90`, /proc/net/tcp's spelling of 127.0.0.1:8080 (little-endian IPv4)."""
    packed = socket.inet_aton(address[0])
    return f"{int.from_bytes(packed, 'little'):08X}:{address[1]:04X}"


def peer_uid(conn: socket.socket) -> int | None:
    """The uid owning the other end of a loopback TCP connection (None when it cannot be found)."""
    try:
        local, remote = _hex_endpoint(conn.getpeername()), _hex_endpoint(conn.getsockname())
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1] == local and fields[2] == remote:
                    return int(fields[7])
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    return None


class Acceptor:
    """A listening socket whose every connection is handled by `handle(client)` in a thread of its own."""

    def __init__(self, listener: socket.socket, name: str):
        self._listener = listener
        self._closed = threading.Event()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def close(self) -> None:
        """Stop accepting (connections in flight end when either side closes)."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def handle(self, client: socket.socket) -> None:
        """Serve one accepted connection (and close it)."""
        raise NotImplementedError

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(client,), daemon=True).start()


class UnixRelay(Acceptor):
    """A listener on (host, port) whose connections are piped to `target` (a unix socket), one thread each."""

    def __init__(self, host: str, target: str, *, allowed_uids: set[int] | None = None):
        self.target = target
        self.allowed_uids = allowed_uids if allowed_uids is not None else {os.geteuid()}
        listener = socket.create_server((host, 0))
        self.port = listener.getsockname()[1]
        super().__init__(listener, f"relay-{host}:{self.port}")

    def handle(self, client: socket.socket) -> None:
        """Check the peer's uid, then pipe both ways."""
        upstream = None
        try:
            uid = peer_uid(client)
            if uid not in self.allowed_uids:
                logger.warning("desktop relay %s refused a connection from uid %s", self.target, uid)
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.settimeout(10)
            upstream.connect(self.target)
            upstream.settimeout(None)
            shuttle(client, upstream)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()


def shuttle(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides have finished sending (half-closes forwarded)."""
    peers = {a: b, b: a}
    open_ends = {a, b}
    with selectors.DefaultSelector() as sel:
        for sock in peers:
            sel.register(sock, selectors.EVENT_READ)
        while open_ends:
            for key, _ in sel.select():
                src = key.fileobj
                data = src.recv(65536)
                if data:
                    peers[src].sendall(data)
                    continue
                sel.unregister(src)
                open_ends.discard(src)
                with contextlib.suppress(OSError):
                    peers[src].shutdown(socket.SHUT_WR)
