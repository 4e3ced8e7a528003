"""`python -m bench.ckpt_state` at the smallest scale: one buffered trajectory of 15 PNG rows goes through the
trainer's save and load; the figures are consistent with each other."""

import json

import pytest

from bench import ckpt_state


def test_the_bench_saves_loads_and_reports_against_the_raw_write(capsys):
    assert ckpt_state.main(["--episodes", "1", "--screens", "synthetic"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["rows"] == 15 and 0 < out["state_gib"] < 0.1  # PNG rows: well under a MiB each
    assert out["save_s"] > 0 and out["load_s"] > 0 and out["raw_write_s"] > 0
    # (the figures are printed rounded to 0.01 s)
    assert out["save_vs_raw_write"] == pytest.approx(out["save_s"] / out["raw_write_s"], rel=0.1, abs=0.05)
    assert out["flagship_ema_vs_verl"] == round(4 / 12, 3)  # fp32 EMA against fp32 weights + Adam's two moments
