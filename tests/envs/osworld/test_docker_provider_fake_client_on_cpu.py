"""The `osworld` env on OSWorld's own docker provider, with a FAKE Docker client (no Docker engine on CPU CI).

Real: OSWorldEnv, DesktopEnv, DockerProvider (port allocation, readiness polling, revert, stop), OSWorld's
controllers and the getter/metric of `evaluate()`, all talking HTTP. Fake: `docker.from_env()` returns a client
whose `containers.run(...)` records its arguments and, in place of the VM, serves OSWorld's server protocol
(a stdlib http.server in a thread) on the host port the provider mapped to container port 5000.
"""

import importlib.util
import io
import json
import os
import re
import sys
import threading
import time
import wave
from http.server import ThreadingHTTPServer

import docker
import pytest
from PIL import Image

from verl_cua.envs import InfraFailure, make_env
from verl_cua.envs.osworld.evaluators import MissingDependency
from verl_cua.testing.fake_docker import QuietHandler

docker_provider = pytest.importorskip("desktop_env.providers.docker.provider")

IMAGE = "happysixd/osworld-docker"
SCREEN = (320, 200)
COLOURS = ["red", "blue", "green", "yellow"]  # one per container, so an observation says which VM it came from
# a Qwen3-VL tool call, coordinates normalised to 0..1000: (500, 250) is pixel (160, 50) of a 320x200 screen
CLICK = json.dumps({"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 250]}})
CLICK = f"<tool_call>\n{CLICK}\n</tool_call>"
EVALUATOR = {
    "func": "exact_match",
    "result": {"type": "vm_command_line", "command": "cat ~/hello.txt", "shell": True},
    "expected": {"type": "rule", "rules": {"expected": "hello world\n"}},
}
WRITE_HELLO = {
    "id": "docker-write-hello",
    "instruction": "Write hello world to ~/hello.txt.",
    "config": [{"type": "execute", "parameters": {"command": "echo hello world > ~/hello.txt", "shell": True}}],
    "evaluator": EVALUATOR,
}
NO_SETUP = {"id": "docker-no-setup", "instruction": "Look at the screen.", "config": [], "evaluator": EVALUATOR}
# the AT-SPI tree the fake VM's /accessibility serves: a window with a push button and a text field
STATE = "https://accessibility.ubuntu.example.org/ns/state"
COMPONENT = "https://accessibility.ubuntu.example.org/ns/component"
SHOWN = 'st:showing="true" st:visible="true"'
TREE = (
    f'<desktop-frame xmlns:st="{STATE}" xmlns:cp="{COMPONENT}"><application name="gedit">'
    f'<push-button name="Save" {SHOWN} cp:screencoord="(200, 20)" cp:size="(60, 30)"></push-button>'
    f'<entry name="Search" {SHOWN} cp:screencoord="(10, 100)" cp:size="(120, 24)">find me</entry>'
    "</application></desktop-frame>"
)


class FakeVM:
    """What the container's VM would serve on port 5000: screenshots, /execute with a two-command shell."""

    def __init__(self, port: int, colour: str, boot_polls: int = 1):
        self.colour, self.boot_polls = colour, boot_polls
        self.files: dict[str, str] = {}
        self.requests: list[tuple[str, str, object]] = []  # (method, path, JSON body)
        png = io.BytesIO()
        Image.new("RGB", SCREEN, colour).save(png, format="PNG")
        self.png = png.getvalue()
        vm = self

        class Handler(QuietHandler):
            def do_GET(self):
                vm.requests.append(("GET", self.path, None))
                if self.path == "/screenshot":
                    if vm.boot_polls > 0:  # still booting: the provider must poll again
                        vm.boot_polls -= 1
                        return self._send(503, b"{}")
                    return self._send(200, vm.png, "image/png")
                if self.path == "/terminal":
                    return self._send(200, json.dumps({"output": ""}).encode())
                if self.path == "/accessibility":
                    return self._send(200, json.dumps({"AT": TREE}).encode())
                return self._send(404, b"{}")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                vm.requests.append(("POST", self.path, body))
                if self.path in ("/execute", "/setup/execute"):
                    output = vm.run(body["command"])
                    reply = {"status": "success", "output": output, "error": "", "returncode": 0}
                    return self._send(200, json.dumps(reply).encode())
                return self._send(404, b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def run(self, command) -> str:
        """`echo TEXT > ~/F` and `cat ~/F` (shell strings); anything else (pyautogui via python -c) prints nothing."""
        if isinstance(command, str):
            if m := re.fullmatch(r"echo (.+) > ~/(\S+)", command):
                self.files[m[2]] = m[1] + "\n"
            elif m := re.fullmatch(r"cat ~/(\S+)", command):
                return self.files.get(m[1], "")
        return ""

    def executed(self, path: str = "/execute") -> list:
        return [body for method, p, body in self.requests if method == "POST" and p == path]

    def shutdown(self):
        self.server.shutdown()
        self.server.server_close()


class FakeContainer:
    def __init__(self, client, kwargs: dict, vm: FakeVM | None):
        self.client, self.kwargs, self.vm = client, kwargs, vm
        self.stopped = self.removed = False
        self.labels = dict(kwargs.get("labels") or {})
        host_ports = {f"{c}/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(h)}] for c, h in kwargs["ports"].items()}
        self.attrs = {"NetworkSettings": {"Ports": host_ports}}

    def stop(self):
        if self.removed:
            raise docker.errors.NotFound("No such container")
        self.stopped = True
        if self.vm is not None:
            self.vm.shutdown()
            self.vm = None

    def remove(self, force: bool = False):
        if self.removed:
            raise docker.errors.NotFound("No such container")
        if force and not self.stopped:
            self.stop()
        if not self.stopped:
            raise docker.errors.APIError("cannot remove a running container")
        self.removed = True
        self.client.running.remove(self)


class FakeDockerClient:
    """`docker.DockerClient` as DockerProvider and our labels use it: `containers.run(...)`, `containers.list()`."""

    def __init__(self, vm_boots: bool = True):
        self.vm_boots = vm_boots
        self.runs: list[FakeContainer] = []  # every container ever run, in order
        self.running: list = [FakeForeignContainer()]
        self.containers = self

    def list(self, all: bool = False, filters: dict | None = None):
        wanted = [label.partition("=") for label in (filters or {}).get("label", [])]
        return [c for c in self.running if not any(c.labels.get(k) != v for k, _, v in wanted)]

    def run(self, image, **kwargs):
        kwargs = {**kwargs, "image": image, "environment": dict(kwargs["environment"])}
        vm = FakeVM(kwargs["ports"][5000], COLOURS[len(self.runs) % 4]) if self.vm_boots else None
        container = FakeContainer(self, kwargs, vm)
        self.runs.append(container)
        self.running.append(container)
        return container


class FakeForeignContainer:
    """Another project's container, already holding host ports 8006 and 5000."""

    labels: dict = {}

    attrs = {"NetworkSettings": {"Ports": {"8006/tcp": [{"HostPort": "8006"}], "5000/tcp": [{"HostPort": "5000"}]}}}


class Clock:
    """The provider module's `time`: sleeps are recorded and advance a virtual clock instead of waiting (only the
    sleeps: a slow poll on a loaded machine does not shorten the readiness wait's count)."""

    def __init__(self):
        self.start, self.offset, self.sleeps = time.time(), 0.0, []

    def time(self):
        return self.start + self.offset

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.offset += seconds


@pytest.fixture
def docker_fakes(tmp_path, monkeypatch):
    """Patch docker.from_env, the provider's clock and lock file; chdir to tmp_path. Returns (client, clock)."""
    client, clock = FakeDockerClient(), Clock()
    monkeypatch.setattr(docker_provider.docker, "from_env", lambda *a, **k: client)
    monkeypatch.setattr(docker_provider, "time", clock)
    init = docker_provider.DockerProvider.__init__

    def init_with_lock_in_tmp(self, region):  # upstream locks /tmp/docker_port_allocation.lck
        init(self, region)
        self.lock_file = tmp_path / "docker_port_allocation.lck"

    monkeypatch.setattr(docker_provider.DockerProvider, "__init__", init_with_lock_in_tmp)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Ubuntu.qcow2").write_bytes(b"QFI\xfb")  # stands in for the VM disk image
    yield client, clock
    for container in client.runs:  # a failing test must not leave servers behind
        if container.vm is not None:
            container.vm.shutdown()


def _kvm(monkeypatch, present: bool):
    exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: present if p == "/dev/kvm" else exists(p))


def _docker_env(**kwargs):
    kwargs = {"docker_start_interval": 0, **kwargs}  # starts one after another: nothing to space
    return make_env("osworld", provider="docker", path_to_vm="Ubuntu.qcow2", pause=0, screen=SCREEN, **kwargs)


@pytest.mark.parametrize("kvm", [True, False], ids=["kvm", "no-kvm"])
def test_fake_client_container_arguments_and_port_mapping(docker_fakes, tmp_path, monkeypatch, kvm):
    client, clock = docker_fakes
    _kvm(monkeypatch, kvm)
    env = _docker_env()
    try:
        assert len(client.runs) == 1
        run = client.runs[0].kwargs
        assert run["image"] == IMAGE and run["detach"] is True
        labels = run["labels"]  # ours, so close() and the next run's reaper find the container
        assert labels["verl-cua.owner-pid"] == str(os.getpid()) and labels["verl-cua.env"] == env.docker.env_id
        assert run["cap_add"] == ["NET_ADMIN"]
        env_vars = {"DISK_SIZE": "32G", "RAM_SIZE": "4G", "CPU_CORES": "4"}
        if kvm:
            assert run["devices"] == ["/dev/kvm"] and run["environment"] == env_vars
        else:
            assert run["devices"] == [] and run["environment"] == {**env_vars, "KVM": "N"}
        # the relative qcow2 path, made absolute, mounted read-only where the image boots it from
        assert run["volumes"] == {str(tmp_path / "Ubuntu.qcow2"): {"bind": "/System.qcow2", "mode": "ro"}}
        de = env.desktop_env
        assert run["ports"] == {8006: de.vnc_port, 5000: de.server_port, 9222: de.chromium_port, 8080: de.vlc_port}
        assert len(set(run["ports"].values())) == 4
        assert de.vnc_port != 8006 and de.server_port != 5000  # held by the foreign container: skipped
        assert de.controller.http_server == f"http://localhost:{de.server_port}"
        sc = de.setup_controller
        assert (sc.server_port, sc.chromium_port, sc.vlc_port) == (de.server_port, de.chromium_port, de.vlc_port)
        # the VM answered 503 once while "booting": the provider polled again after its retry interval
        screenshots = [r for r in client.runs[0].vm.requests if r[1] == "/screenshot"]
        # (a poll that fails outright on a loaded machine is one more such wait)
        assert len(screenshots) == 2 and set(clock.sleeps) == {docker_provider.RETRY_INTERVAL}
        assert env.healthy()
    finally:
        env.close()
    assert client.runs[0].stopped and client.runs[0].removed and client.running == client.running[:1]
    assert not env.healthy()


def test_fake_client_reset_step_evaluate_and_revert_to_a_fresh_container(docker_fakes):
    client, clock = docker_fakes
    env = _docker_env(action_format="qwen3vl")
    try:
        first = client.runs[0]
        obs = env.reset(WRITE_HELLO)  # a fresh container is clean: no revert
        assert len(client.runs) == 1 and obs.screen == SCREEN and obs.screenshot.getpixel((0, 0)) == (255, 0, 0)
        assert obs.instruction == WRITE_HELLO["instruction"] and obs.extra["task_id"] == "docker-write-hello"
        setup = first.vm.executed("/setup/execute")
        assert [b["command"] for b in setup] == ["echo hello world > ~/hello.txt"]
        assert env.evaluate() == 1.0  # the real getter read ~/hello.txt from this container's server port

        # a model's tool call, normalised 0..1000, rendered by us to pyautogui in screenshot pixels
        sent = len(first.vm.executed())  # the getter's `cat` went through /execute too
        result = env.step(CLICK)
        assert result.info == {"action_valid": True, "infra_failure": False, "error": None} and not result.done
        (body,) = first.vm.executed()[sent:]
        assert body["shell"] is False and body["command"][:2] == ["python", "-c"]
        assert "pyautogui.click(160, 50)" in body["command"][2]
        # model text that parses to nothing is not sent
        assert not env.step("I would click somewhere.").info["action_valid"]
        assert len(first.vm.executed()) == sent + 1

        # used (setup + a step): the next reset stops and removes the container and runs a new one
        stops_before = len(clock.sleeps)
        obs = env.reset(NO_SETUP)
        assert first.stopped and first.removed and first not in client.running
        assert len(client.runs) == 2
        second = client.runs[1]
        assert second.kwargs["image"] == IMAGE and second.kwargs["volumes"] == first.kwargs["volumes"]
        assert second.kwargs["ports"][5000] == env.desktop_env.server_port
        assert docker_provider.WAIT_TIME in clock.sleeps[stops_before:]
        assert obs.screenshot.getpixel((0, 0)) == (0, 0, 255)  # from the new container
        assert env.evaluate() == 0.0  # the new VM has no ~/hello.txt

        # not used since (no setup steps, no step): no revert
        env.reset(NO_SETUP)
        assert len(client.runs) == 2 and not second.stopped
    finally:
        env.close()
    assert second.stopped and second.removed and client.running == client.running[:1]


def test_fake_client_som_reads_the_vm_s_tree_and_a_named_mark_clicks_its_centre(docker_fakes):
    """A VM provider's desktop gives the same observation as the local one: the tree from the VM's /accessibility,
    the marks listed and drawn, and `tag_N` sent to the VM as a click at that mark's centre; the control, the default
    observation, asks the VM for no tree."""
    client, _clock = docker_fakes
    env = _docker_env(action_format="pyautogui", observation="som")
    try:
        obs = env.reset(NO_SETUP)
        vm = client.runs[0].vm
        assert ("GET", "/accessibility", None) in vm.requests
        text = obs.extra["elements_text"]
        assert "[1]\tpush-button\tSave\t(200, 20)\t(60, 30)" in text and "[2]\tentry\tSearch" in text, text
        assert obs.screenshot.getpixel((201, 25)) == (255, 0, 0)  # mark 1's number, drawn at its box's corner
        sent = len(vm.executed())
        result = env.step("```python\npyautogui.click(tag_2)\n```")
        assert result.info["action_valid"], result.info
        (body,) = vm.executed()[sent:]
        assert "pyautogui.click(70, 112)" in body["command"][2]  # the centre of (10, 100, 120, 24)
        missing = env.step("```python\npyautogui.click(tag_3)\n```")
        assert not missing.info["action_valid"] and "tag_3 is not a mark" in missing.info["error"]
        assert len(vm.executed()) == sent + 1  # the invalid mark was not sent
    finally:
        env.close()
    plain = _docker_env(action_format="pyautogui")
    try:
        plain.reset(NO_SETUP)
        assert ("GET", "/accessibility", None) not in client.runs[-1].vm.requests
        assert "elements_text" not in plain.reset(NO_SETUP).extra
    finally:
        plain.close()


def test_fake_client_without_an_engine_is_an_infra_failure(docker_fakes, monkeypatch):
    def no_engine(*args, **kwargs):
        raise docker.errors.DockerException("Error while fetching server API version: Connection refused")

    monkeypatch.setattr(docker_provider.docker, "from_env", no_engine)
    with pytest.raises(InfraFailure, match="OSWorld docker desktop did not start: DockerException: .*API version"):
        _docker_env()


def test_fake_client_vm_that_never_boots_is_removed_and_an_infra_failure(docker_fakes):
    client, clock = docker_fakes
    client.vm_boots = False  # the container runs, nothing ever answers on its port 5000
    with pytest.raises(InfraFailure, match="did not start: TimeoutError: VM failed to become ready"):
        _docker_env()
    assert len(client.runs) == 1 and client.runs[0].removed and client.running == client.running[:1]
    assert sum(clock.sleeps) >= 300  # the provider's full readiness timeout, on the virtual clock


def _wav(path):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000)
        w.writeframes(b"\x00\x10" * 800)
    return str(path)


@pytest.mark.parametrize("metric,package", [("compare_image_text", "easyocr"), ("compare_audios", "librosa")])
def test_fake_client_evaluate_with_a_missing_package_raises_instead_of_scoring(docker_fakes, tmp_path, metric, package):
    """Upstream's metric catches every exception (easyocr missing scored 0, librosa missing scored 1.0)."""
    loaded = sys.modules.get(package)
    if (importlib.util.find_spec(package) is not None) if loaded is None else not hasattr(loaded, "__verl_cua_stub__"):
        pytest.skip(f"{package} is installed here")
    if metric == "compare_image_text":
        Image.new("RGB", (24, 12), "white").save(tmp_path / "shot.png")
        result, expected = str(tmp_path / "shot.png"), {"type": "text", "text": "hello"}
    else:
        result, expected = _wav(tmp_path / "a.wav"), _wav(tmp_path / "b.wav")
    task = {
        "id": f"docker-{metric}",
        "instruction": "Check the result.",
        "config": [],
        "evaluator": {
            "func": metric,
            "result": {"type": "rule", "rules": result},
            "expected": {"type": "rule", "rules": expected},
        },
    }
    env = _docker_env()
    try:
        env.reset(task)
        with pytest.raises(MissingDependency, match=f"needs the package {package}") as info:
            env.evaluate()
        assert len(str(info.value).splitlines()) == 1 and env.last_eval_error is None
    finally:
        env.close()


def test_fake_client_infeasible_task_scores_the_agent_saying_fail(docker_fakes):
    """DesktopEnv looks `infeasible` up in `metrics` at reset, then scores 1 only if the last action was FAIL."""
    client, _ = docker_fakes
    task = {"id": "docker-infeasible", "instruction": "Book a flight to Mars.", "evaluator": {"func": "infeasible"}}
    env = _docker_env(action_format="pyautogui")
    try:
        env.reset(task)
        result = env.step("FAIL")
        assert result.done and result.info["action_valid"] and env.evaluate() == 1.0
        env.reset(task)  # used by the step: a fresh container
        assert len(client.runs) == 2
        assert env.step("DONE").done and env.evaluate() == 0.0
    finally:
        env.close()
