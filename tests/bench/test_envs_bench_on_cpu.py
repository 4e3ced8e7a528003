"""The env benchmark runs on real Chromium with a tiny budget and reports every figure it promises."""

from bench.envs import overhead, pooled


def test_env_bench_reports_medians_overhead_memory_and_pool_rates(chromium):
    figures = overhead(steps=5)
    assert figures["reset_median_ms"] > 0 and figures["step_median_ms"] > 0 and figures["raw_step_median_ms"] > 0
    assert figures["pss_mb_per_instance"] > 50  # chromedriver + a real chromium
    assert -100 < figures["overhead_pct"] < 100
    assert pooled(2, 3) > 0


def test_env_bench_reports_the_local_desktop_figures(local_desktop):
    from bench.envs import desktop_overhead

    figures = desktop_overhead(steps=4, resets_n=1)
    assert 0 < figures["raw_step_median_ms"] and 0 < figures["step_median_ms"] < 5000
    assert set(figures["reset_ms"]) == {"ready", "evaluated", "cold"}
    assert all(0 < r["p50"] <= r["p95"] < 30000 for r in figures["reset_ms"].values())
    assert figures["pss_mb_per_instance"] > 20  # Xvfb + server + openbox + xterm
    assert figures["pss_mb_per_instance_calc"] > figures["pss_mb_per_instance"]  # LibreOffice really opened
    assert pooled(2, 2, "local_desktop") > 0


def test_env_bench_reports_what_a_busy_agent_costs_its_own_desktops_machinery(local_desktop):
    from bench.envs import desktop_own_load

    figures = desktop_own_load(rounds=2, commands=2)
    assert set(figures) == {"evaluator_command", "screenshot"} and all(v > 0 for v in figures.values())
