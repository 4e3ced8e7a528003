"""The parser benchmark runs end to end on a small corpus and reports every figure it promises."""

from bench.parse import run


def test_bench_reports_rates_ratio_and_that_we_never_raise():
    res = run(n=60, repeat=1)
    assert set(res["formats"]) == {"qwen3vl", "qwen25vl", "uitars", "pyautogui", "claude"}
    for figures in res["formats"].values():
        assert figures["parses_per_s"] > 0 and figures["raised"] == 0
        assert 0 < figures["valid"] < 60  # the corpus mixes benign and truncated outputs
    assert res["mixed"]["raised"] == 0
    assert res["ui_tars"]["ratio_ours_over_ui_tars"] > 0 and res["ui_tars"]["ours_raised"] == 0
    assert res["ui_tars"]["ui_tars_raised"] > 0  # the mixed corpus has truncated outputs ui-tars cannot take
    assert res["ui_tars_benign_only"]["ui_tars_raised"] == 0 == res["ui_tars_benign_only"]["ours_raised"]
