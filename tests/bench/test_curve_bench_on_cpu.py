"""The quickstart's curve.png from a run's summary.json (written by the real summary module from a metrics.jsonl):
per-step success and its trailing mean, each evaluated model's held-out success, the blind baseline when the
summary has one; bad input is one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import curve
from verl_cua.integrations.verl import summary as run_summary

ROOT = Path(__file__).resolve().parents[2]
RATES = [0.1, 0.0, 0.2, 0.1, 0.15, 0.3, 0.2, 0.35, 0.4, 0.5, 0.45, 0.5]
PNG = b"\x89PNG\r\n\x1a\n"


def write_run(tmp_path: Path, blind: dict | None = None) -> tuple[Path, Path]:
    """A metrics.jsonl of len(RATES) training steps (32 episodes each) and its summary.json, with two evaluations."""
    metrics = tmp_path / "metrics.jsonl"
    lines = [{"step": i + 1, "data": {"cua/episodes": 32, "cua/success_rate": r, "critic/rewards/mean": r}}
             for i, r in enumerate(RATES)]  # fmt: skip
    metrics.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    gap = {"click-test": {"own": 17 / 64, "cross": 0.25, "gap": 0.016, "gap_low": -0.07, "gap_high": 0.11}}
    evals = {"initial": {"success_rate": 2 / 64, "scored": 64, "successes": 2},
             "trained": {"success_rate": 17 / 64, "scored": 64, "successes": 17, "grounding": gap}}  # fmt: skip
    record = run_summary.summarise(run_summary.read_steps(metrics), 300.0, evals)
    if blind is not None:
        record["blind"] = blind
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(record))
    return path, metrics


def test_the_series_are_the_runs_steps_their_window_mean_and_the_marks(tmp_path):
    path, _ = write_run(tmp_path, blind={"heldout_rate": 0.58, "point": [79, 135]})
    series = curve.run_series(json.loads(path.read_text()))
    assert series["steps"] == list(range(1, 13)) and series["success"] == RATES and series["window"] == 5
    assert series["mean"][0] == pytest.approx(0.1) and series["mean"][4] == pytest.approx(0.11)  # (.1+0+.2+.1+.15)/5
    assert series["mean"][-1] == pytest.approx((0.35 + 0.4 + 0.5 + 0.45 + 0.5) / 5)
    assert [(name, rate) for _, rate, name in series["marks"]] == [("initial", 2 / 64), ("trained", 17 / 64)]
    assert "held-out: 0.27 (17/64), grounding gap +0.02 [-0.07, +0.11]" in series["marks"][1][0]  # gap beside it
    assert "grounding gap" not in series["marks"][0][0]  # none measured: none shown
    assert series["blind"] == 0.58
    assert curve.run_series(json.loads(write_run(tmp_path)[0].read_text()))["blind"] is None  # only when it has one


def test_curve_png_is_drawn_beside_the_summary(tmp_path):
    path, metrics = write_run(tmp_path, blind={"heldout_rate": 0.58})
    assert curve.episodes_per_step(metrics) == 32
    proc = subprocess.run([sys.executable, "-m", "bench.curve", str(path), "--metrics", str(metrics)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    png = tmp_path / "curve.png"
    assert png.read_bytes()[:8] == PNG and png.stat().st_size > 20_000
    assert proc.stdout.strip() == f"bench.curve: {png}"


@pytest.mark.parametrize(
    ("content", "message"), [(None, "cannot read"), ("{not json", "cannot read"), ('{"steps": 3}', "no per_step")]
)
def test_a_bad_summary_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "summary.json"
    if content is not None:
        path.write_text(content)
    assert curve.main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench.curve: ") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "curve.png").exists()
