"""A FAKE Docker engine for the docker desktops' CPU tests (no Docker engine on CPU CI), and its installation behind
desktop-env's real `DockerProvider`.

`docker.from_env()` returns a `FakeDockerClient` whose `containers.run(...)` takes `RUN_S` (as docker does under
desktop-env's lock) and serves, in place of the VM, a stdlib HTTP server on the mapped host port (127.0.0.1) that
answers 503 for its boot time, then screenshots. Times are scaled down: a run of ~0.04 s stands for docker's 1-3 s.
`boot_s` may be a function of the boots under way, for a host that slows down as more VMs boot; `list_s` is the time
`containers.list()` takes per container (docker inspects each one), the cost of desktop-env's port scans.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import docker
from PIL import Image

RUN_S = 0.04  # a `docker run` under the lock
BOOT_S = 0.3  # a VM answering 503 before its first screenshot
PNG = io.BytesIO()
Image.new("RGB", (64, 40), "blue").save(PNG, format="PNG")

# a task whose setup step marks the desktop used: its next reset stops the container and runs a new one
USED_TASK = {
    "id": "docker-used",
    "instruction": "Look at the screen.",
    "config": [{"type": "execute", "parameters": {"command": "true", "shell": True}}],
    "evaluator": {"func": "infeasible"},
}


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and sends whole bodies (`_send`)."""

    def log_message(self, *args):
        """Quiet."""

    def _send(self, code: int, body: bytes, kind: str = "application/json"):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakeVM:
    """The container's VM on its server port: 503 while booting, then screenshots, /terminal and /setup/execute."""

    def __init__(self, port: int, boot_s: float, on_ready: Callable[[], None] = lambda: None):
        ready_at = time.monotonic() + boot_s
        self.booted = threading.Event()
        booted, ready_lock = self.booted, threading.Lock()

        def ready() -> None:
            with ready_lock:
                if not booted.is_set():
                    booted.set()
                    on_ready()

        self.ready = ready

        class Handler(QuietHandler):
            def do_GET(self):
                if time.monotonic() < ready_at:
                    return self._send(503, b"{}")
                if self.path == "/screenshot":
                    ready()
                    return self._send(200, PNG.getvalue(), "image/png")
                return self._send(200, json.dumps({"output": ""}).encode())

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                reply = {"status": "success", "output": "", "error": "", "returncode": 0}
                return self._send(200, json.dumps(reply).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def shutdown(self):
        """Power off (a boot under way ends too)."""
        self.ready()
        self.server.shutdown()
        self.server.server_close()


class FakeContainer:
    """A container the fake ran: its run's arguments, labels, published ports and VM."""

    def __init__(self, client, kwargs: dict, vm: FakeVM | None):
        self.client, self.kwargs, self.vm = client, kwargs, vm
        self.id = f"fake{len(client.runs):04d}"
        self.labels = dict(kwargs.get("labels") or {})
        ports = {f"{c}/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(h)}] for c, h in kwargs.get("ports", {}).items()}
        self.attrs = {"NetworkSettings": {"Ports": ports}}
        self.stopped = self.removed = False

    def stop(self):
        """docker stop: the VM powers off."""
        if self.removed:
            raise docker.errors.NotFound("No such container")
        self.stopped = True
        self._power_off()

    def remove(self, force: bool = False):
        """docker rm (force: a running one too)."""
        with self.client.lock:
            if self.removed:
                raise docker.errors.NotFound("No such container")
            if not (self.stopped or force):
                raise docker.errors.APIError("cannot remove a running container")
            self.removed = True
            self.client.existing.remove(self)
        self._power_off()

    def _power_off(self):
        vm, self.vm = self.vm, None
        if vm is not None:
            vm.shutdown()


class FakeDockerClient:
    """`containers.run/list` of a docker client; `existing` is every container not removed, `max_booting` the most
    VMs that were booting at once, `refuse_ports` host ports of which the next run asking for one is refused as
    taken (by a container another process ran; then the set is cleared)."""

    def __init__(self, boot_s: float | Callable[[int], float] = BOOT_S, list_s: float = 0.0):
        self.boot_s, self.list_s = boot_s, list_s
        self.lock = threading.Lock()
        self.runs: list[FakeContainer] = []
        self.existing: list[FakeContainer] = []
        self.containers = self
        self.booting = self.max_booting = 0
        self.refuse_ports: set[int] = set()

    def run(self, image, **kwargs):
        """docker run: `RUN_S`, then a VM serving on the mapped server port, booting for `boot_s`."""
        time.sleep(RUN_S)
        taken = self.refuse_ports & set(kwargs["ports"].values())
        if taken:  # another process's container got them first
            self.refuse_ports = set()
            self.add({"com.example.app": "raced"}, {8000 + i: port for i, port in enumerate(sorted(taken))})
            raise docker.errors.APIError(f"driver failed programming external connectivity: Bind for "
                                         f"0.0.0.0:{min(taken)} failed: port is already allocated")  # fmt: skip
        with self.lock:
            self.booting += 1
            self.max_booting = max(self.max_booting, self.booting)
            boot_s = self.boot_s(self.booting) if callable(self.boot_s) else self.boot_s
        vm = FakeVM(kwargs["ports"][5000], boot_s, self._booted)
        with self.lock:
            container = FakeContainer(self, {**kwargs, "image": image}, vm)
            self.runs.append(container)
            self.existing.append(container)
        return container

    def _booted(self) -> None:
        with self.lock:
            self.booting -= 1

    def add(self, labels: dict, ports: dict[int, int] | None = None) -> FakeContainer:
        """A container some other process ran (no VM behind it), publishing `ports` (container: host)."""
        with self.lock:
            container = FakeContainer(self, {"labels": labels, "ports": ports or {}}, None)
            self.runs.append(container)
            self.existing.append(container)
        return container

    def list(self, all: bool = False, filters: dict | None = None):
        """docker ps: the containers not removed that carry every label of `filters`."""
        wanted = [label.partition("=") for label in (filters or {}).get("label", [])]
        time.sleep(self.list_s * len(self.existing))  # docker inspects each container it lists
        with self.lock:
            return [c for c in self.existing if not any(c.labels.get(k) != v for k, _, v in wanted)]

    def ours(self) -> list:
        """The containers carrying our labels."""
        return [c for c in self.list() if "verl-cua.env" in c.labels]


def install(monkeypatch: Any, folder: Path, fake: FakeDockerClient) -> FakeDockerClient:
    """Put `fake` behind desktop-env's real provider (pytest's `monkeypatch`): its lock files in `folder`, its polls
    scaled down, a VM image file there, the working directory there."""
    from desktop_env.providers.docker import provider as docker_provider

    from verl_cua.envs.osworld import docker_fleet

    monkeypatch.setattr(docker_provider.docker, "from_env", lambda *a, **k: fake)
    monkeypatch.setattr(docker_provider, "RETRY_INTERVAL", 0.1)
    monkeypatch.setattr(docker_provider, "WAIT_TIME", 0.01)
    monkeypatch.setattr(docker_fleet, "_reaped", False)  # each test is a "next run"
    init = docker_provider.DockerProvider.__init__

    def init_with_lock_in_folder(self, region):  # upstream locks /tmp/docker_port_allocation.lck, host-wide
        init(self, region)
        self.lock_file = Path(folder) / "docker_port_allocation.lck"

    monkeypatch.setattr(docker_provider.DockerProvider, "__init__", init_with_lock_in_folder)
    # restored after the test; 0 so the test's own (short) wait holds: a process keeps the longest wait asked for
    monkeypatch.setattr(docker_provider, "LOCK_TIMEOUT", 0.0)
    monkeypatch.chdir(folder)
    (Path(folder) / "Ubuntu.qcow2").write_bytes(b"QFI\xfb")
    return fake
