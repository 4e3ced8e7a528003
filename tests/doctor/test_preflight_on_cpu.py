"""The preflight on this GPU-less machine: the real recipes run as a user runs them (real interpreter, real dataset
step, `python -m verl_cua.main` up to the point before Ray starts) and stop in one line per blocker. A fake
`nvidia-smi` (named so) stands in for GPUs; a hub on 127.0.0.1 stands in for Hugging Face's."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from verl_cua.doctor.gpus import gpu_findings, visible_gpus
from verl_cua.doctor.model import model_finding
from verl_cua.doctor.preflight import PreflightError, check_preflight, standalone_config
from verl_cua.testing.interpreters import python_without

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"


def _run_recipe(recipe, tmp_path, timeout=120, args=(), **env):
    run_env = {**os.environ, "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1", "DATA_DIR": str(tmp_path / "data"),
               "VERL_FILE_LOGGER_PATH": str(tmp_path / "metrics.jsonl"), **env}  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(["bash", str(RECIPES / recipe), *args], cwd=tmp_path, env=run_env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    return proc, time.monotonic() - start


def _lines(stderr):
    return [line for line in stderr.splitlines() if not line.startswith("+")]


def test_the_flagship_on_the_local_desktop_stops_before_ray_naming_the_gpus_it_needs_and_found(tmp_path):
    proc, seconds = _run_recipe("run_qwen3vl_sdpo_osworld.sh", tmp_path, PROVIDER="local",
                                TASKS="files-make-dirs,calc-sum-column", WANDB_API_KEY="", WANDB_MODE="",
                                NETRC=str(tmp_path / "no-netrc"))  # fmt: skip
    lines = _lines(proc.stderr)
    assert proc.returncode == 1 and seconds < 60, (seconds, lines[-5:])
    prefix = "run_qwen3vl_sdpo_osworld.sh: "
    gpu = next(line for line in lines if line.startswith(f"{prefix}gpu: "))
    assert "needs 8 GPUs (trainer.nnodes=1 x trainer.n_gpus_per_node=8)" in gpu and "found 0" in gpu
    assert "no NVIDIA driver answers" in gpu
    model = next(line for line in lines if line.startswith(f"{prefix}model: "))
    assert "Qwen/Qwen3-VL-8B-Instruct" in model and "HF_HUB_OFFLINE=1" in model and "MODEL_PATH=" in model
    assert any(line.startswith(f"{prefix}vllm: not installed") for line in lines)  # the rollout's engine
    assert any(line.startswith(f"{prefix}wandb: no credentials") for line in lines)  # LOGGER's default
    blockers = [line for line in lines if re.match(rf"^{prefix}[\w -]+: \S", line) and "blocker(s)" not in line]
    summary = lines[-1]  # closes the list: one line per blocker above it
    assert re.match(rf"{prefix}\d+ blocker\(s\) before the run starts; SKIP_PREFLIGHT=1 starts it anyway", summary)
    assert int(summary.split()[1]) == len(blockers) >= 3
    assert "ray init kwargs" not in proc.stdout + proc.stderr  # Ray never started
    assert not (tmp_path / "data").exists()  # nor the dataset step (a VM image download would come before it)


def test_appended_overrides_reach_the_recipes_early_check(tmp_path):
    args = ["trainer.n_gpus_per_node=2", "trainer.total_epochs=1"]
    proc, _ = _run_recipe("run_qwen3vl_sdpo_osworld.sh", tmp_path, PROVIDER="local", TASKS="files-make-dirs",
                          N_GPUS_PER_NODE="4", args=args)  # fmt: skip
    gpu = next(line for line in _lines(proc.stderr) if ": gpu: " in line)
    assert "needs 2 GPUs (trainer.nnodes=1 x trainer.n_gpus_per_node=2)" in gpu  # the override, not the variable


@pytest.mark.parametrize("recipe", ["run_qwen3vl_sdpo_osworld.sh", "run_qwen3vl_gigpo_osworld.sh",
                                    "run_qwen25vl_grpo_osworld.sh"])  # fmt: skip
def test_a_recipe_run_with_an_interpreter_lacking_osworlds_client_names_that_interpreter(tmp_path, recipe):
    """The missing client first, then every other blocker (the GPUs of this GPU-less machine among them), counted."""
    exe = python_without("desktop_env", tmp_path)
    proc, seconds = _run_recipe(recipe, tmp_path, PYTHON=str(exe), PROVIDER="local")
    lines = _lines(proc.stderr)
    assert proc.returncode == 1 and seconds < 60, lines
    assert lines[0].startswith(f"{recipe}: python: {exe} (PYTHON={exe}) lacks OSWorld's client (desktop-env)")
    assert f"PYTHON={exe} bash envs/osworld/install.sh" in lines[0] and "set PYTHON=" in lines[0]
    assert any(line.startswith(f"{recipe}: gpu: ") and "found 0" in line for line in lines), lines
    summary = lines[-1]
    assert summary == f"{recipe}: {len(lines) - 1} blocker(s) before the run starts; SKIP_PREFLIGHT=1 starts it anyway"
    assert not (tmp_path / "data").exists()  # stopped before the dataset step


def test_the_flagship_names_every_blocker_at_once_on_the_docker_provider(tmp_path):
    """The recipe's default provider: no OSWorld client, no GPUs, the Docker daemon where none answers, each on a line
    of its own before anything is downloaded; the negative control (an interpreter with the client) lacks that line
    only."""
    docker = (
        subprocess.run(["docker", "info"], capture_output=True).returncode == 0 if shutil.which("docker") else False
    )
    vm = tmp_path / "vm" / "Ubuntu.qcow2"
    exe = python_without("desktop_env", tmp_path)
    runs = {}
    for name, python in (("without", exe), ("with", sys.executable)):
        proc, _ = _run_recipe("run_qwen3vl_sdpo_osworld.sh", tmp_path, PYTHON=str(python), VM_PATH=str(vm),
                              TASKS="files-make-dirs")  # fmt: skip
        assert proc.returncode == 1, proc.stderr[-3000:]
        runs[name] = _lines(proc.stderr)
    prefix = "run_qwen3vl_sdpo_osworld.sh: "
    checks = {name: [line[len(prefix) :].split(":")[0] for line in lines[:-1]] for name, lines in runs.items()}
    assert checks["without"][0] == "python" and "python" not in checks["with"]
    assert "osworld tasks" in checks["without"] and "osworld tasks" not in checks["with"]  # read by the client
    assert [c for c in checks["without"][1:] if c != "osworld tasks"] == checks["with"]  # the same other blockers
    assert "gpu" in checks["with"] and ("docker" in checks["with"]) == (not docker)
    for lines in runs.values():
        assert (
            lines[-1] == f"{prefix}{len(lines) - 1} blocker(s) before the run starts; SKIP_PREFLIGHT=1 starts it anyway"
        )
    assert not vm.parent.exists() and not (tmp_path / "data").exists()  # nothing downloaded, no dataset step


def test_the_standalone_preflight_lists_blockers_found_before_it_first(tmp_path, monkeypatch, capsys):
    from verl_cua.doctor import preflight, system

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    base = ["--gpus", "0", "--model", str(model), "--prog", "run.sh"]
    assert preflight.main(base) == 0  # the negative control: a CPU run on a local model has no blocker
    assert preflight.main([*base, "--provider", "local"]) == 0  # docker's checks are for the docker provider

    def no_daemon(*args, **kwargs):
        raise FileNotFoundError("docker")

    monkeypatch.setattr(system.subprocess, "run", no_daemon)
    room = shutil.disk_usage(tmp_path)._replace(free=int(1000e9))  # the VM image's room is not this test's point
    monkeypatch.setattr(system.shutil, "disk_usage", lambda path: room)
    capsys.readouterr()
    assert preflight.main([*base, "--provider", "docker", "--vm-path", str(tmp_path / "vm.qcow2"),
                           "--blocker", "/x/python (PYTHON=x) lacks OSWorld's client"]) == 1  # fmt: skip
    assert capsys.readouterr().err.splitlines() == [
        "run.sh: python: /x/python (PYTHON=x) lacks OSWorld's client",
        "run.sh: docker: OSWorld's docker provider needs a Docker daemon this user can reach",
        "run.sh: 2 blocker(s) before the run starts; SKIP_PREFLIGHT=1 starts it anyway",
    ]
    monkeypatch.setattr(system.shutil, "disk_usage", lambda path: room._replace(free=int(29e9)))
    assert preflight.main([*base, "--provider", "docker", "--vm-path", str(tmp_path / "vm.qcow2")]) == 1
    assert capsys.readouterr().err.splitlines()[1:] == [  # a disk too small for the image's download is a blocker
        f"run.sh: vm image: {tmp_path / 'vm.qcow2'} absent: its download needs ~40 GB, 29 GB free at {tmp_path}",
        "run.sh: 2 blocker(s) before the run starts; SKIP_PREFLIGHT=1 starts it anyway",
    ]


def test_a_python_that_is_not_there_or_lacks_verl_is_named(tmp_path):
    proc, _ = _run_recipe("run_qwen3vl_sdpo_osworld.sh", tmp_path, PYTHON="no-such-python3", PROVIDER="local")
    assert proc.returncode == 1 and _lines(proc.stderr) == [
        "run_qwen3vl_sdpo_osworld.sh: PYTHON=no-such-python3 is not an interpreter on PATH; set PYTHON= to the python "
        "of the environment that has verl-cua (e.g. PYTHON=.venv/bin/python)"
    ]
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    proc, _ = _run_recipe("run_qwen3vl_sft_osworld.sh", tmp_path, PYTHON=str(bare / "bin" / "python"))
    lines = _lines(proc.stderr)
    assert proc.returncode == 1 and any(f"{bare}/bin/python (PYTHON=" in line and "lacks verl 0.9.1" in line
                                        for line in lines), lines  # fmt: skip


def test_skip_preflight_skips_the_interpreter_check_and_the_machine_checks(tmp_path, monkeypatch):
    script = f"PYTHON=no-such-python3 SKIP_PREFLIGHT=1; source {RECIPES}/preflight.sh; require_python; echo passed"
    assert subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout.strip() == "passed"
    config = standalone_config(8, str(tmp_path / "no-model"))
    with pytest.raises(PreflightError):
        check_preflight(config)
    monkeypatch.setenv("SKIP_PREFLIGHT", "1")
    check_preflight(config)
    monkeypatch.delenv("SKIP_PREFLIGHT")
    check_preflight({**config, "cua": {"preflight": {"skip": True}}})


def test_the_sft_recipe_checks_before_torchrun_starts_a_process_per_gpu(tmp_path):
    proc, seconds = _run_recipe("run_qwen3vl_sft_osworld.sh", tmp_path, MODEL_PATH=str(tmp_path / "no-such-model"),
                                N_GPUS_PER_NODE="4")  # fmt: skip
    lines = _lines(proc.stderr)
    assert proc.returncode == 1 and seconds < 30, lines
    assert lines[0].startswith("run_qwen3vl_sft_osworld.sh: gpu: the run needs 4 GPUs") and "found 0" in lines[0]
    model = tmp_path / "no-such-model"
    assert lines[1] == f"run_qwen3vl_sft_osworld.sh: model: {model}: no such folder (MODEL_PATH: a local folder or a " \
                       "hub name org/model)"  # fmt: skip
    assert "torchrun" not in proc.stderr.split("verl_cua.doctor.preflight")[-1]  # never reached


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    """A fake `nvidia-smi` first on PATH listing `n` H100s (index, uuid, name, driver, memory)."""

    def install(n, driver="580.82.07"):
        rows = "\n".join(f"{i}, GPU-{i:08d}-fake, NVIDIA H100 80GB HBM3, {driver}, 81559 MiB" for i in range(n))
        exe = tmp_path / "fakebin" / "nvidia-smi"
        exe.parent.mkdir(exist_ok=True)
        exe.write_text(f"#!/bin/sh\ncat <<'EOF'\n{rows}\nEOF\n")
        exe.chmod(0o755)
        monkeypatch.setenv("PATH", f"{exe.parent}:{os.environ['PATH']}")
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    return install


def _gpu_config(per_node, nnodes=1, tp=1, rollout="vllm"):
    return {"trainer": {"device": "cuda", "nnodes": nnodes, "n_gpus_per_node": per_node},
            "actor_rollout_ref": {"rollout": {"name": rollout, "tensor_model_parallel_size": tp}}}  # fmt: skip


def test_gpus_asked_are_counted_against_the_visible_ones(fake_gpus, monkeypatch):
    fake_gpus(4)
    assert visible_gpus().count == 4
    (need,) = gpu_findings(_gpu_config(8), visible_gpus())
    assert need.level == "FAIL" and "needs 8 GPUs" in need.detail and "found 4" in need.detail
    assert "set N_GPUS_PER_NODE=4" in need.detail
    (ok,) = gpu_findings(_gpu_config(4, tp=2), visible_gpus())
    assert ok.level == "ok" and "4 x NVIDIA H100" in ok.detail
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,GPU-00000003")  # by index and by UUID prefix, as CUDA reads it
    assert visible_gpus().count == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,7,1")  # CUDA stops at the first entry it cannot use
    assert visible_gpus().count == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,1")  # and shows nothing for a list naming a GPU twice
    assert visible_gpus().count == 0 and "names a GPU twice" in visible_gpus().describe()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-1a2b3c4d-0000")
    assert visible_gpus().count == 1 and "MIG instance of NVIDIA H100" in visible_gpus().describe()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus().count == 0 and "CUDA_VISIBLE_DEVICES='' leaves no GPU of the 4" in visible_gpus().describe()
    (need,) = gpu_findings(_gpu_config(4), visible_gpus())
    assert need.level == "FAIL" and "found 0: CUDA_VISIBLE_DEVICES=''" in need.detail


def test_a_rollout_replica_that_does_not_divide_the_gpus_is_a_blocker(fake_gpus):
    fake_gpus(1)
    need, tp = gpu_findings(_gpu_config(1, tp=2), visible_gpus())
    assert need.level == "ok" and tp.level == "FAIL" and tp.check == "rollout gpus"
    assert "takes 2 GPUs" in tp.detail and "set TP to a divisor of 1" in tp.detail
    assert [f.level for f in gpu_findings(_gpu_config(1, tp=2, rollout="hf"), visible_gpus())] == ["ok"]


def test_multi_node_and_ray_clusters(fake_gpus, monkeypatch, tmp_path):
    fake_gpus(8)
    (need,) = gpu_findings(_gpu_config(8, nnodes=2), visible_gpus())
    assert need.level == "ok" and "needs 8 GPUs on this node" in need.detail
    fake_gpus(2)  # the driver's node need not hold a node's worth: a warning, the Ray wait judges the cluster
    (need,) = gpu_findings(_gpu_config(8, nnodes=2), visible_gpus())
    assert need.level == "warn" and "needs 16 GPUs" in need.detail and "this one has 2" in need.detail
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "ray"))  # a cluster `ray start` left here: ray.init() joins it
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:6379")
    assert gpu_findings(_gpu_config(8), visible_gpus())[0].level == "info"
    monkeypatch.delenv("RAY_TMPDIR")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # never contacted: only its presence is read
    fake_gpus(0)
    (need,) = gpu_findings(_gpu_config(8, nnodes=2), visible_gpus())
    assert need.level == "info" and "on the Ray cluster it joins" in need.detail
    cpu = {"trainer": {"device": "cpu", "nnodes": 1, "n_gpus_per_node": 2}}
    assert [f.level for f in gpu_findings(cpu, visible_gpus())] == ["info"]
    assert gpu_findings({"trainer": {"n_gpus_per_node": None}}, visible_gpus())[0].check == "gpu"  # no KeyError


class _Hub:
    """A Hugging Face hub on 127.0.0.1: /api/models/<repo> answers with the status its table gives (404 else)."""

    def __init__(self, statuses):
        hub = self
        self.asked = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                hub.asked.append(self.path)
                status = statuses.get(self.path.removeprefix("/api/models/"), 404)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(json.dumps({"id": self.path}).encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hub(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    servers = []

    def make(statuses):
        servers.append(_Hub(statuses))
        monkeypatch.setenv("HF_ENDPOINT", servers[-1].url)
        return servers[-1]

    yield make
    for server in servers:
        server.server.shutdown()


def test_a_model_path_resolves_locally_or_on_a_hub_that_answers(tmp_path, hub, monkeypatch):
    folder = tmp_path / "model"
    folder.mkdir()
    assert model_finding(str(folder)).level == "FAIL" and "without config.json" in model_finding(str(folder)).detail
    (folder / "config.json").write_text("{}")
    assert model_finding(str(folder)).level == "ok"
    assert "a file, not a model folder" in model_finding(str(folder / "config.json")).detail
    assert "no such folder" in model_finding(str(tmp_path / "nope")).detail
    server = hub({"org/there": 200, "org/gated": 401})
    assert model_finding("org/there").level == "ok"
    gated = model_finding("org/gated")
    assert gated.level == "FAIL" and "HF_TOKEN" in gated.detail
    missing = model_finding("org/not-there")
    assert missing.level == "FAIL" and "has no such model" in missing.detail and server.url in missing.detail
    assert server.asked == ["/api/models/org/there", "/api/models/org/gated", "/api/models/org/not-there"]


def test_a_model_neither_local_nor_reachable_is_one_line_and_a_cached_one_needs_no_hub(tmp_path, hub, monkeypatch):
    server = hub({})
    server.server.shutdown()
    server.server.server_close()  # nothing listens on the hub's port any more
    down = model_finding("org/model", timeout=2)
    assert down.level == "FAIL" and "\n" not in down.detail and "did not answer in 2 tries" in down.detail
    assert "hf download org/model --local-dir DIR" in down.detail and "MODEL_PATH=DIR" in down.detail
    snapshot = tmp_path / "hf-cache" / "models--org--model" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "hf-cache" / "models--org--model" / "refs").mkdir()
    (tmp_path / "hf-cache" / "models--org--model" / "refs" / "main").write_text("abc123")
    cached = model_finding("org/model")
    assert cached.level == "ok" and "in the Hugging Face cache" in cached.detail
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_finding("org/model").level == "ok"
    offline = model_finding("org/other")
    assert offline.level == "FAIL" and "HF_HUB_OFFLINE=1 forbids the download" in offline.detail


@pytest.mark.e2e
def test_a_cpu_recipe_with_an_unreachable_model_stops_in_one_line_before_ray(tmp_path, hub, chromium):
    server = hub({})
    server.server.shutdown()
    server.server.server_close()
    proc, seconds = _run_recipe("run_tiny_grpo_miniwob_cpu.sh", tmp_path, MODEL_PATH="nobody/no-such-model",
                                HF_HUB_OFFLINE="", OUT=str(tmp_path / "out"),
                                VENV=str(Path(sys.executable).parents[1]))  # fmt: skip
    lines = [line for line in _lines(proc.stderr) if line.startswith("verl-cua: ")]
    assert proc.returncode == 1 and seconds < 90, proc.stderr[-2000:]
    assert len(lines) == 2 and lines[0].startswith("verl-cua: model: nobody/no-such-model: no such folder here, and "
                                                   f"the hub ({server.url}) did not answer")  # fmt: skip
    assert "ray init kwargs" not in proc.stdout


def test_verl_agents_own_verl_and_config_are_not_judged_by_our_trainers_pins(monkeypatch, tmp_path):
    """verl-agent ships its own verl (0.3.x) and has no `cua.env` of ours: its preflight checks GPUs, model and
    stack presence, never our verl pin or desktops (a `+cua.preflight.*` override must not make it read them)."""
    from verl_cua.doctor import system

    real = system._version
    monkeypatch.setattr(system, "_version", lambda name: "0.3.1.dev" if name == "verl" else real(name))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = {"trainer": {"device": "cpu", "nnodes": 1, "n_gpus_per_node": 1},
              "actor_rollout_ref": {"model": {"path": str(model)}, "rollout": {"name": "hf"}},
              "env": {"env_name": "osworld"}, "cua": {"preflight": {"resource_timeout": 60}}}  # fmt: skip
    ours = PreflightError
    with pytest.raises(ours, match=r"verl: 0\.3\.1\.dev \(needs ==0\.9\.1"):
        check_preflight(config)
    check_preflight(config, host="verl-agent")
    checks = {f.check: f for f in system.system_findings(config, host="verl-agent")}
    assert checks["verl"].detail == "0.3.1.dev (verl-agent's)" and "memory" not in checks and "flash-attn" not in checks
