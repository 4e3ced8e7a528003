"""Opt-in web access for a local desktop (`network="egress"`): an HTTP proxy on the host side of its sandbox.

The desktop's network namespace has loopback only. With egress on, its apps get `http_proxy`/`https_proxy` (and
Chromium `--proxy-server`) pointing at 127.0.0.1:3128 inside, which the desktop's server pipes to a unix socket
where this proxy listens, outside the sandbox. The proxy resolves each destination itself and connects only to a
public address: never loopback, private, CGNAT, link-local, multicast, reserved or documentation ranges, an
address of this host, or a network this host is on (so no Ray dashboard, metadata service or LAN neighbour). It
connects to the address it checked (no second lookup a DNS rebinding could change). HTTPS goes through CONNECT;
plain HTTP requests are forwarded in origin form.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
from collections.abc import Callable

from verl_cua.envs.osworld.host_relay import Acceptor, shuttle

logger = logging.getLogger(__name__)

MAX_HEADER = 64 * 1024
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def host_networks() -> tuple[set[Address], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    """This host's own addresses and the networks it is on (from its interfaces)."""
    import psutil

    own: set[Address] = set()
    nets = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family not in (socket.AF_INET, socket.AF_INET6) or not a.address:
                continue
            with contextlib.suppress(ValueError):
                ip = ipaddress.ip_address(a.address.split("%")[0])
                own.add(ip)
                if a.netmask:
                    nets.append(ipaddress.ip_network(f"{ip}/{a.netmask}", strict=False))
    return own, nets


def public_only(ip: Address, own: set[Address], nets: list) -> bool:
    """Whether the desktop may reach `ip`: a global address that is neither this host's nor on its networks."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast and ip not in own and not any(ip in n for n in nets)


class EgressProxy(Acceptor):
    """An HTTP/CONNECT proxy on unix socket `path` that connects only where `allowed(ip)` says."""

    def __init__(self, path: str, *, allowed: Callable[[Address], bool] | None = None):
        if allowed is None:
            own, nets = host_networks()
            allowed = lambda ip: public_only(ip, own, nets)  # noqa: E731
        self.allowed = allowed
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o666)  # the desktop's user connects (through its server); nobody else sees the directory
        listener.listen(64)
        super().__init__(listener, f"egress-{path}")

    def handle(self, client: socket.socket) -> None:
        """Read one request head, check its destination, then tunnel or forward."""
        upstream = None
        try:
            client.settimeout(30)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk or len(head) > MAX_HEADER:
                    return
                head += chunk
            header, _, rest = head.partition(b"\r\n\r\n")
            lines = header.decode("latin-1").split("\r\n")
            method, target, version = (lines[0].split(" ") + ["", ""])[:3]
            if method == "CONNECT":
                host, port, path = *_split_host_port(target, 443), ""
            elif target.startswith("http://"):
                authority, _, path = target[7:].partition("/")
                host, port = _split_host_port(authority, 80)
                path = "/" + path
            else:
                return _reply(client, 400, "only CONNECT and absolute http:// requests")
            upstream, why = self._connect(host, port)
            if upstream is None:
                logger.info("egress refused %s:%s (%s)", host, port, why)
                return _reply(client, 403, why)
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                kept = [h for h in lines[1:] if not h.lower().startswith(("proxy-", "connection:"))]
                request = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
                upstream.sendall(request.encode("latin-1") + rest)
            client.settimeout(None)
            upstream.settimeout(None)
            shuttle(client, upstream)
        except (OSError, ValueError):
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()

    def _connect(self, host: str, port: int) -> tuple[socket.socket | None, str]:
        """A connection to the first allowed address of `host` (resolved here, connected as checked)."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            return None, f"cannot resolve {host}: {exc}"
        refused = []
        for family, kind, proto, _, sockaddr in infos:
            ip = ipaddress.ip_address(sockaddr[0].split("%")[0])
            if not self.allowed(ip):
                refused.append(str(ip))
                continue
            sock = socket.socket(family, kind, proto)
            sock.settimeout(15)
            try:
                sock.connect(sockaddr)
                return sock, ""
            except OSError as exc:
                sock.close()
                return None, f"cannot connect to {ip}: {exc}"
        return None, f"{host} resolves to {', '.join(refused)}: not a public address"


def _split_host_port(authority: str, default: int) -> tuple[str, int]:
    host, sep, port = authority.rpartition(":")
    if not sep or "]" in port:
        host, port = authority, str(default)
    return host.strip("[]"), int(port)


def _reply(client: socket.socket, status: int, why: str) -> None:
    body = f"verl-cua egress: {why}\n".encode()
    reason = {400: "Bad Request", 403: "Forbidden"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    client.sendall(head.encode() + body)
