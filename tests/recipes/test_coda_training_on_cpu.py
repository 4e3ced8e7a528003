"""`recipes/run_tiny_coda_miniwob_cpu.sh` trains with verl on the CPU in both of CODA's Stage-1 modes, two steps each
(hf rollout, FSDP2 on CPU, GRPO with k3 KL and seq-mean-token-mean, the grounding stand-in as executor, named as
such): MODE=online plays MiniWoB++ in Chromium, one row per planner turn; MODE=recorded trains on the oracle's
recorded click-button states, scored by CODA's action match in [0, 2], with no browser at training time. The
planner is the tiny random model: these runs prove the plumbing (every planner turn reaches the executor, none of
its calls fails, the reward lies in the mode's range, validation runs), not learning (`bench.coda` measures that)."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from verl_cua.metrics_log import read_records

pytestmark = pytest.mark.e2e  # both tests train with verl

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "run_tiny_coda_miniwob_cpu.sh"
SMALL = {
    "STEPS": "2",
    "PROMPTS_PER_STEP": "2",
    "N_RESP": "4",
    "PPO_MINI_BATCH": "2",
    "TRAIN_SEEDS": "0-7",
    "RECORD_SEEDS": "0-3",
    "HELDOUT_SEEDS": "100000-100001",
    "HELDOUT_SAMPLES": "1",
}
HELDOUT = "val-core/"


def _train(tmp_path: Path, mode: str, model: str) -> tuple[list[dict], list[dict], Path]:
    """Two steps of the recipe in `mode`: (training steps' metrics, validations' metrics, OUT)."""
    out = tmp_path / mode
    env = {**os.environ, "VENV": sys.prefix, "OUT": str(out), "MODE": mode, "MODEL_PATH": model, **SMALL}
    cmd = ["bash", str(RECIPE), "trainer.val_before_train=false"]  # one validation, after the last step
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env={**env, "RAY_DEDUP_LOGS": "0"})
    (tmp_path / f"{mode}.log").write_text(proc.stdout + "\n" + proc.stderr)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-6000:])
    records = [r["data"] for r in read_records(out / "metrics.jsonl")]
    steps = [r for r in records if "cua/executor_calls" in r]  # the last step's record holds its validation too
    return steps, [r for r in records if any(k.startswith(HELDOUT) for k in r)], out


@pytest.fixture(scope="module")
def planner() -> str:
    """The tiny random Qwen2.5-VL (built once, cached; the suite's other tiny-model tests share it)."""
    from verl_cua.testing.tiny_models import build_tiny_model

    return str(build_tiny_model("qwen25vl"))


def test_online_mode_trains_every_planner_turn_through_the_standin(planner, tmp_path, chromium):
    steps, validations, _ = _train(tmp_path, "online", planner)
    assert len(steps) == 2, steps
    for m in steps:
        rows = int(SMALL["PROMPTS_PER_STEP"]) * int(SMALL["N_RESP"])  # one planner turn an episode (MAX_STEPS=1)
        assert m["cua/executor_calls"] + m["cua/planner_answers"] == rows
        assert m["cua/executor_failures"] == 0 and m["cua/infra_failures"] == 0
        assert 0.0 <= m["critic/score/mean"] <= 1.0  # the env's score
    assert validations, "no validation ran"


def test_recorded_mode_trains_on_labelled_states_without_a_browser(planner, tmp_path, chromium):
    steps, validations, out = _train(tmp_path, "recorded", planner)
    rows = pd.read_parquet(out / "train.parquet")
    assert len(rows) == 4 and set(rows["data_source"]) == {"recorded_states"}  # the oracle's 4 successful steps
    state = rows.iloc[0]["extra_info"]["coda_state"]
    assert state["elements_text"] and state["target_box"] is not None  # the table read, the button's box
    assert len(steps) == 2, steps
    for m in steps:
        rows = int(SMALL["PROMPTS_PER_STEP"]) * int(SMALL["N_RESP"])  # one state a row
        assert m["cua/executor_calls"] + m["cua/planner_answers"] == rows
        assert m["cua/executor_failures"] == 0
        assert 0.0 <= m["critic/score/mean"] <= 2.0  # CODA's action match
        assert m.get("cua/env_seconds_mean", 0.0) == 0.0  # no desktop was stepped
    assert validations, "no validation ran"
