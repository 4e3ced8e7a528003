"""The env benchmark runs on real Chromium with a tiny budget and reports every figure it promises."""

from bench.envs import overhead, pooled


def test_env_bench_reports_medians_overhead_memory_and_pool_rates(chromium):
    figures = overhead(steps=5)
    assert figures["reset_median_ms"] > 0 and figures["step_median_ms"] > 0 and figures["raw_step_median_ms"] > 0
    assert figures["pss_mb_per_instance"] > 50  # chromedriver + a real chromium
    assert -100 < figures["overhead_pct"] < 100
    assert pooled(2, 3) > 0
