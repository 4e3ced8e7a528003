"""The sft-data benchmark runs end to end on a few 1080p Claude episodes and reports its figures: the conversion
costs more than only reading the screenshots, and every step becomes a row with its screenshots' tokens."""

import json

from bench.sft_data import main


def test_bench_reports_seconds_per_1000_steps_against_the_read_anchor(capsys):
    assert main(["--episodes", "2", "--steps", "2"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["steps"] == res["rows"] == 4 and res["rows_layout"] == "step"
    assert res["sft_data_s_per_1000_steps"] > res["anchor_s_per_1000_steps"] > 0 and res["ratio_to_anchor"] > 1
    assert res["tokens_mean"] > 1000  # a 1003520-pixel cap leaves ~1000 image tokens per 1080p screenshot
