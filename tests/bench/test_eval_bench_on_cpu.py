"""The eval benchmark plays real MiniWoB episodes through the harness and a bare loop and reports both."""

from bench.eval import compare


def test_eval_bench_reports_harness_and_bare_step_times(chromium):
    figures = compare("miniwob", steps=3, rounds=1)
    assert figures["harness_ms_per_step"] > 0 and figures["bare_ms_per_step"] > 0
    assert 0.2 < figures["overhead_ratio"] < 5
    assert figures["disk_kb_per_step"] > 0  # screenshots and step lines really written
    assert figures["request_kb_mean"] > 0 and figures["bare_request_kb_mean"] > 0
