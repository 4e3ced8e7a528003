"""recipes/run_qwen25vl_coda_osworld.sh (CODA Stage 1 online, docs/coda.md) without GPUs, Docker or a model: it composes
to the paper's GRPO knobs with a planner and an executor; its preflight probes the executor's `GET /v1/models` on
127.0.0.1 (a live server passes, a dead port or an unlisted model is one line); and with EXECUTOR_URL empty it serves
the executor itself on EXECUTOR_GPUS, outside verl's pool, waits for it and stops it on exit (a stub `vllm` stands in,
named so). The trainer call is recorded, never run; every server here listens on 127.0.0.1 only."""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from verl_cua.doctor import preflight
from verl_cua.doctor.executor import executor_findings
from verl_cua.eval.executor import ExecutorSettings
from verl_cua.integrations.verl.config.checks import validate_cua_config
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.prepare import prepare_config
from verl_cua.recipe_export.record import main_overrides, record_calls, write_stubs

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "run_qwen25vl_coda_osworld.sh"
NAME = RECIPE.name
UI_TARS = "ByteDance-Seed/UI-TARS-1.5-7B"
SUMMARY = f"{NAME}: 1 blocker(s) before the run starts; SKIP_PREFLIGHT=1 starts it anyway"
SCRUBBED = ("SKIP_PREFLIGHT", "VERL_CUA_COMPOSE_ONLY", "CUDA_VISIBLE_DEVICES", "VLLM", "PLANNER_GPUS")

# PYTHON for a recipe run "for real" here: the interpreter check and the preflight run in this interpreter; any other
# call (the dataset step, the trainer) is only recorded, with the CUDA_VISIBLE_DEVICES it was given.
RECORDING_PYTHON = """#!/bin/sh
if [ "$1" = "-" ] || [ "$1 $2" = "-m verl_cua.doctor.preflight" ]; then exec "{python}" "$@"; fi
printf '%s\\n' "CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES-unset}} $*" >> "{log}"
"""

# A stand-in for `vllm` (named so, not vLLM): prints its argv, GPUs and process group, then serves /v1/models
# listing the model it was asked to serve on --host/--port; with STUB_VLLM_DIES set it exits at once.
STUB_VLLM = """#!{python}
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
args = sys.argv[1:]
print(json.dumps({{"argv": args, "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(),
                  "pgid": os.getpgid(0)}}), flush=True)
if os.environ.get("STUB_VLLM_DIES"):
    sys.exit(3)
model, host, port = args[1], args[args.index("--host") + 1], int(args[args.index("--port") + 1])
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({{"object": "list", "data": [{{"id": model, "object": "model"}}]}}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
ThreadingHTTPServer((host, port), Handler).serve_forever()
"""


class ModelsServer:
    """An OpenAI-compatible `GET /v1/models` on 127.0.0.1 listing `models` (404 for any other path); `asked` keeps
    the paths it was asked for."""

    def __init__(self, models: list[str]):
        self.asked: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.asked.append(self.path)
                body = json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in models]}).encode()
                self.send_response(200 if self.path == "/v1/models" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def models_server():
    servers = []

    def start(models):
        servers.append(ModelsServer(models))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stub_overrides(tmp_path: Path, *args: str, **env_vars: str) -> list[str]:
    """The overrides the recipe hands `python -m verl_cua.main`, run with recording stubs (as `verl-cua doctor` and
    the export run it: VERL_CUA_COMPOSE_ONLY, no server started)."""
    stubs = write_stubs(tmp_path / "stub")
    vm = tmp_path / "Ubuntu.qcow2"
    vm.touch()
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PYTHON": str(stubs / "python3"), "VM_PATH": str(vm),
           "DATA_DIR": str(tmp_path / "data"), "VERL_CUA_COMPOSE_ONLY": "1", **env_vars}  # fmt: skip
    return main_overrides(record_calls(RECIPE, stubs, tmp_path, *args, env=env))


def _compose(overrides: list[str]):
    """The config as `verl_cua.main` composes and checks it before Ray starts."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from verl_cua.integrations.verl.plugin import register_estimators

    register_estimators()
    with initialize_config_module("verl_cua.integrations.verl.config", version_base=None):
        cfg = compose("cua_trainer", overrides=[o for o in overrides if not o.lstrip("+~").startswith("hydra.")])
    validate_cua_config(OmegaConf.to_container(cfg.cua, resolve=True))
    prepare_config(cfg, registered=tuple(ADV_ESTIMATOR_REGISTRY))
    return cfg


def _docs_group_size() -> int:
    """The GRPO group size docs/coda.md gives for CODA's objective."""
    text = (ROOT / "docs" / "coda.md").read_text()
    return int(re.search(r"`rollout\.n` = the group size \([^)]*?(\d+)", text).group(1))


def test_the_recipe_composes_to_codas_stage_1_online_with_the_papers_grpo_knobs(tmp_path):
    cfg = _compose(_stub_overrides(tmp_path, "trainer.total_epochs=3"))
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert cfg.algorithm.adv_estimator == "grpo" and rollout.n == _docs_group_size() == 8
    assert (actor.use_kl_loss, actor.kl_loss_type, actor.loss_agg_mode) == (True, "low_var_kl", "seq-mean-token-mean")
    assert (cfg.cua.planner.mode, cfg.cua.planner.spec, cfg.cua.env.rows) == ("online", "coda", "step")
    assert cfg.cua.env.name == "osworld" and cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-VL-32B-Instruct"
    executor = ExecutorSettings.from_mapping(OmegaConf.to_container(cfg.cua.executor))
    assert (executor.kind, executor.base_url, executor.model) == ("openai", "http://127.0.0.1:8100/v1", UI_TARS)
    assert (executor.format, executor.timeout_s, executor.retries, executor.api_key_env) == ("uitars", 60, 3, None)
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node, cfg.trainer.total_epochs) == (1, 6, 3)  # 6 + 2 GPUs
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert need_reference_policy(cfg)  # the k3 KL's reference
    # an executor already serving, and the smaller planner, from the variables
    cfg = _compose(_stub_overrides(tmp_path, EXECUTOR_URL="http://10.0.0.5:8000/v1", EXECUTOR_MODEL="tars",
                                   MODEL_PATH="Qwen/Qwen2.5-VL-7B-Instruct", N_GPUS_PER_NODE="8"))  # fmt: skip
    assert (cfg.cua.executor.base_url, cfg.cua.executor.model) == ("http://10.0.0.5:8000/v1", "tars")
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-VL-7B-Instruct" and cfg.trainer.n_gpus_per_node == 8


def test_sdpos_teacher_is_refused_in_planner_mode_in_one_line(tmp_path):
    """Why the shared estimator-swap test swaps this recipe to grpo and gigpo only."""
    with pytest.raises(CuaConfigError, match="^cua.planner.mode=online with algorithm.adv_estimator=sdpo is not"):
        _compose(_stub_overrides(tmp_path, "algorithm.adv_estimator=sdpo"))


def test_the_composed_configs_executor_is_probed_as_the_trainers_preflight_probes_it(tmp_path, models_server):
    """`verl_cua.main` checks the composed config before Ray starts (`preflight.blockers`): the recipe's executor
    passes when it serves EXECUTOR_MODEL; with nothing on its port, the one blocker names the URL."""
    server = models_server([UI_TARS])
    config = OmegaConf.to_container(_compose(_stub_overrides(tmp_path, EXECUTOR_URL=server.url)), resolve=True)
    (found,) = executor_findings(config)
    assert found.level == "ok" and server.asked == ["/v1/models"]
    assert not [f for f in preflight.blockers(config) if f.check == "executor"]
    port = free_port()
    config = OmegaConf.to_container(_compose(_stub_overrides(tmp_path, EXECUTOR_PORT=str(port))), resolve=True)
    (dead,) = [f for f in preflight.blockers(config) if f.check == "executor"]
    assert dead.detail.startswith(f"http://127.0.0.1:{port}/v1/models does not answer (ConnectError: ")
    assert "\n" not in dead.detail and "EXECUTOR_URL" in dead.detail and "cua.executor.base_url" in dead.detail


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    return model


def _run_recipe(tmp_path: Path, **env_vars: str) -> tuple[subprocess.CompletedProcess, list[str], list[str]]:
    """The recipe run as a user runs it, on this GPU-less machine's settings (no GPUs, the hf engine, a local model,
    the local provider, the console logger), with RECORDING_PYTHON: (the process, its own stderr lines, the recorded
    calls)."""
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir(exist_ok=True)
    python.write_text(RECORDING_PYTHON.format(python=sys.executable, log=log))
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXECUTOR_") and k not in SCRUBBED}
    env.update({"PYTHON": str(python), "HF_HUB_OFFLINE": "1", "DATA_DIR": str(tmp_path / "data"), "PROVIDER": "local",
                "N_GPUS_PER_NODE": "0", "TP": "1", "ENGINE": "hf", "MODEL_PATH": str(_model(tmp_path)),
                "LOGGER": "[console]", "TASKS": "files-make-dirs", **env_vars})  # fmt: skip
    proc = subprocess.run(["bash", str(RECIPE)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    own = [line for line in proc.stderr.splitlines() if line.startswith(f"{NAME}: ")]  # not set -x's trace
    return proc, own, log.read_text().splitlines() if log.exists() else []


def _trainer_call(calls: list[str]) -> str:
    (call,) = [c for c in calls if " -m verl_cua.main " in c]
    return call


def test_the_preflight_passes_with_a_live_executor_and_fails_in_one_line_on_a_dead_one(tmp_path, models_server):
    server = models_server([UI_TARS])
    proc, own, calls = _run_recipe(tmp_path, EXECUTOR_URL=server.url)
    assert proc.returncode == 0 and own == [], proc.stderr[-3000:]
    assert server.asked == ["/v1/models"]  # probed once, before anything else ran
    assert f"cua.executor.base_url={server.url}" in _trainer_call(calls)
    port = free_port()  # nobody listens there
    proc, own, calls = _run_recipe(tmp_path, EXECUTOR_URL=f"http://127.0.0.1:{port}/v1")
    assert proc.returncode == 1 and calls == [], proc.stderr[-3000:]
    assert len(own) == 2 and own[1] == SUMMARY, own
    assert own[0].startswith(f"{NAME}: executor: http://127.0.0.1:{port}/v1/models does not answer (ConnectError: ")
    assert "start the executor's server" in own[0] and "EXECUTOR_URL" in own[0] and "cua.executor.base_url" in own[0]


def test_an_executor_that_does_not_serve_the_model_is_one_line_too(tmp_path, models_server, capsys):
    """The recipe's early check in process (`python -m verl_cua.doctor.preflight` with its PREFLIGHT_OVERRIDES): the
    model listed passes, another one listed is one line naming both; the stand-in and mode none are not probed."""
    server = models_server([UI_TARS])
    base = ["--gpus", "0", "--model", str(_model(tmp_path)), "--prog", NAME, "--"]
    planner = ["cua.planner.mode=online", "cua.executor.kind=openai", f"cua.executor.base_url={server.url}"]
    assert preflight.main([*base, *planner, f"cua.executor.model={UI_TARS}", "cua.executor.api_key_env=null"]) == 0
    capsys.readouterr()
    assert preflight.main([*base, *planner, "cua.executor.model=UI-TARS-1.5-7B"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{NAME}: executor: {server.url}/models serves {UI_TARS!r}, not 'UI-TARS-1.5-7B': set EXECUTOR_MODEL (the "
        "CODA recipe) or cua.executor.model to the name it serves (vllm serve's --served-model-name)",
        SUMMARY,
    ]
    asked = len(server.asked)
    assert preflight.main([*base, *planner, "cua.executor.kind=standin_grounding", "cua.executor.model=x"]) == 0
    assert preflight.main([*base, "cua.planner.mode=none", f"cua.executor.base_url={server.url}"]) == 0
    assert len(server.asked) == asked == 2  # neither asked the server


def _stub_vllm(tmp_path: Path) -> Path:
    exe = tmp_path / "stub-vllm"
    exe.write_text(STUB_VLLM.format(python=sys.executable))
    exe.chmod(0o755)
    return exe


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_without_executor_url_the_recipe_serves_the_executor_on_its_gpus_and_stops_it(tmp_path):
    port, log = free_port(), tmp_path / "logs" / "executor.log"
    proc, own, calls = _run_recipe(tmp_path, VLLM=str(_stub_vllm(tmp_path)), EXECUTOR_PORT=str(port),
                                   EXECUTOR_LOG=str(log), SKIP_PREFLIGHT="1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    url = f"http://127.0.0.1:{port}/v1"
    assert own == [f"{NAME}: waiting up to 1200 s for the executor at {url} (log: {log})"]
    started = json.loads(log.read_text().splitlines()[0])
    args = started["argv"]
    assert args[:2] == ["serve", UI_TARS] and started["gpus"] == "6,7" and started["pgid"] == started["pid"]
    flags = dict(zip(args[2::2], args[3::2], strict=True))
    assert (flags["--host"], flags["--port"], flags["--tensor-parallel-size"]) == ("127.0.0.1", str(port), "2")
    assert flags["--limit-mm-per-prompt"] == '{"image": 2}'
    trainer = _trainer_call(calls)
    assert trainer.startswith("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 ")  # verl's pool leaves the executor's GPUs out
    assert f"cua.executor.base_url={url}" in trainer and f"cua.executor.model={UI_TARS}" in trainer
    assert _gone(started["pid"])  # stopped when the recipe exited
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_a_served_executor_that_dies_or_gpus_named_twice_stop_the_recipe_in_one_line(tmp_path):
    port, log = free_port(), tmp_path / "executor.log"
    stub = _stub_vllm(tmp_path)
    proc, own, calls = _run_recipe(tmp_path, VLLM=str(stub), EXECUTOR_PORT=str(port), EXECUTOR_LOG=str(log),
                                   SKIP_PREFLIGHT="1", STUB_VLLM_DIES="1")  # fmt: skip
    assert proc.returncode == 1 and not _trainer_call_made(calls), proc.stderr[-3000:]
    assert own[-1] == (f"{NAME}: the executor's server ({stub} serve {UI_TARS}) exited before "
                       f"http://127.0.0.1:{port}/v1/models answered; its log: {log}")  # fmt: skip
    proc, own, calls = _run_recipe(tmp_path, VLLM=str(stub), EXECUTOR_GPUS="5,6", SKIP_PREFLIGHT="1")
    assert proc.returncode == 1 and calls == []
    assert own == [f"{NAME}: GPU 5 is in EXECUTOR_GPUS=5,6 and PLANNER_GPUS=0,1,2,3,4,5: the executor's GPUs are "
                   "outside verl's pool; name each GPU in one of them"]  # fmt: skip


def _trainer_call_made(calls: list[str]) -> bool:
    return any(" -m verl_cua.main " in c for c in calls)
