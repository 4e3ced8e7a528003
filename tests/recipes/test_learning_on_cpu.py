"""Learning, end to end, on the CPU: `bash recipes/quickstart.sh` must raise the success of its tiny model, and its
checkpoint must go through verl's model merger, `verl-cua serve`, `verl-cua eval` and `verl-cua view`. A negative
control with the learning rate at 0 must fail the same criterion, so this test can fail.

The criterion: success over the last K training steps minus success over the first K is at least MARGIN = 0.2.
* A false failure (learning works, the test fails): 5 runs of this configuration (`python -m bench.learn
  --estimators grpo --seeds 5 --steps 30 --set TRAIN_SEEDS=84,116`) rose by 0.456, 0.450, 0.488, 0.544 and 0.606:
  mean 0.509, sd 0.066. MARGIN sits 4.7 sd below the mean: under a normal spread of runs, a working stack fails
  with probability about 1e-6.
* A false pass (nothing learns, the test passes): with the policy fixed, each window is K x 32 episodes of one
  success rate p (0.35 over those runs' first windows); the difference has sd sqrt(2 p (1 - p) / (32 K)) = 0.053,
  and MARGIN is 3.7 of them: probability about 1e-4. The control runs 2K steps: with a fixed policy every step is a
  draw of the same rate, so the gap between the windows changes nothing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.learn import read_run, train
from verl_cua.testing.learning import learnable_model

ROOT = Path(__file__).resolve().parents[2]
STEPS = 30
K = 5
MARGIN = 0.2
# Two training layouts (click-test seeds 84 and 116: ~100 px buttons that overlap), so a 30-step run rises reliably
# (the quickstart's default, a new layout every prompt, rises too slowly and too unevenly for a 1e-3 test); held-out
# evaluation as in the quickstart. One step an epoch: with trainer.total_epochs=1, verl alone would stop at step 1.
CONFIG = {"TRAIN_SEEDS": "84,116"}


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory, chromium):
    """One run of the README's quickstart against this venv (its installs are no-ops here)."""
    out = tmp_path_factory.mktemp("quickstart")
    env = {**os.environ, "VENV": sys.prefix, "OUT": str(out), "STEPS": str(STEPS), "RAY_DEDUP_LOGS": "0", **CONFIG}
    cmd = ["bash", str(ROOT / "recipes" / "quickstart.sh"), "trainer.total_epochs=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    (out / "quickstart.log").write_text(proc.stdout + "\n" + proc.stderr)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-6000:])
    return out, proc.stdout


def test_the_quickstart_learns(quickstart):
    out, _ = quickstart
    run = read_run(out / "train" / "metrics.jsonl")
    assert len(run.success_rate) == STEPS  # total_epochs=1 allows 1: the trainer raised the epochs, never cut
    rise = run.window(K, last=True) - run.window(K)
    assert rise >= MARGIN, f"success {run.window(K):.3f} -> {run.window(K, last=True):.3f}: {run.success_rate}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["window"] == K
    assert summary["first_window_success"] == pytest.approx(run.window(K))
    assert summary["last_window_success"] == pytest.approx(run.window(K, last=True))


def test_the_checkpoint_is_merged_served_evaluated_and_viewed(quickstart):
    out, stdout = quickstart
    merged = out / "model"
    assert (merged / "config.json").is_file() and list(merged.glob("*.safetensors"))
    summary = json.loads((out / "summary.json").read_text())
    for name in ("initial", "trained"):
        figures = summary["eval"][name]
        assert figures["scored"] == 64 and figures["infra_failures"] == 0  # every held-out layout, by each model
        steps = [json.loads(line) for f in sorted((out / "eval" / name).glob("*/*/trajectory.jsonl"))
                 for line in f.read_text().splitlines()]  # fmt: skip
        assert len(steps) == 64 and sum(s["valid"] for s in steps) >= 32  # served text parses as clicks
    report = (out / "report.html").read_text()
    assert "initial" in report and "trained" in report and "click-test" in report
    assert f"report {out / 'report.html'}" in stdout or "report.html" in stdout


def test_a_learning_rate_of_zero_fails_the_same_criterion(quickstart, tmp_path):
    run = train(
        tmp_path,
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        LR=0,
        STEPS=2 * K,
        MODEL_PATH=learnable_model(),  # the quickstart's initial model (built by it, cached)
        **CONFIG,
    )
    assert len(run.success_rate) == 2 * K
    rise = run.window(K, last=True) - run.window(K)
    assert rise < MARGIN, f"a policy that cannot change passed: {run.success_rate}"
