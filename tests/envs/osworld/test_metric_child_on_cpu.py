"""OSWorld's metrics run in a bounded child process: a file the agent wrote costs the host at most the child's
limits (memory, CPU, wall clock), an office file over the unzipped cap is refused before any parser reads it, and
what the child answers is JSON (never unpickled)."""

import subprocess
import sys
import threading
import time

import psutil
import pytest

from verl_cua.envs.osworld import evaluators
from verl_cua.envs.osworld.metric_child import ENTRY, MetricLimit, MetricLimits, call_metric, screen_office_files
from verl_cua.testing.bombs import cell_bomb

pytest.importorskip("desktop_env")
CELL_A1 = {"type": "check_cell", "sheet_idx": 0, "coordinate": "A1", "props": {"value": {"method": "eq", "ref": 1}}}
RULES = {"rules": [CELL_A1]}


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    path = tmp_path_factory.mktemp("bomb") / "bomb.xlsx"
    subprocess.run([sys.executable, "-c", cell_bomb(str(path), 4000)], check=True, capture_output=True)
    return str(path)


def test_a_metric_gives_the_same_answer_in_its_child_as_in_this_process():
    bounded, raw = evaluators.metric("exact_match"), evaluators.raw_metric("exact_match")
    assert getattr(bounded, "__verl_cua_bounded__", False) and not hasattr(raw, "__verl_cua_bounded__")
    for value in ("a", "b"):
        assert bounded(value, {"expected": "a"}) == raw(value, {"expected": "a"})


def test_a_metric_that_raises_in_its_child_raises_one_line_here():
    with pytest.raises(RuntimeError, match=r"^metric exact_match raised TypeError"):
        evaluators.metric("exact_match")("a", "not a dict")


def _children() -> list[str]:
    return [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True) if ENTRY in " ".join(p.cmdline())]


def test_the_wall_clock_bound_kills_the_child_and_leaves_nothing_running(bomb):
    seen = []
    watcher = threading.Thread(target=lambda: seen.extend(_children() for _ in range(40) if not time.sleep(0.05)))
    watcher.start()
    start = time.monotonic()
    # 6 s: the child loads desktop-env first, which on a machine busy with a verl run took over 2 s in CI
    with pytest.raises(MetricLimit, match=r"ran past 6 s \(killed\)"):
        call_metric("compare_table", (bomb, None), RULES, MetricLimits(wall_seconds=6.0))
    watcher.join()
    assert time.monotonic() - start < 15
    assert any(seen), "the metric ran in no child"  # the control: it was there while it ran
    assert _children() == []


def test_the_memory_bound_holds_the_child_not_this_process(bomb):
    rss = psutil.Process().memory_info().rss
    try:  # openpyxl's MemoryError is swallowed by the upstream metric (a 0) or reaches us as MetricLimit
        score = call_metric("compare_table", (bomb, None), RULES, MetricLimits(memory=700 << 20))
        assert not score
    except MetricLimit as exc:
        assert "memory" in str(exc) or "died" in str(exc)
    assert psutil.Process().memory_info().rss - rss < 200 << 20


def test_an_office_file_over_the_unzipped_cap_is_refused_before_a_parser_reads_it(bomb, tmp_path):
    with pytest.raises(MetricLimit, match=r"bomb.xlsx uncompresses to \d+ bytes, over the 1000000-byte cap"):
        call_metric("compare_table", (bomb, None), RULES, MetricLimits(unzipped=1_000_000))
    screen_office_files([{"x": [bomb]}], 1 << 30)  # nested paths are screened; under the cap nothing happens
    not_a_zip = tmp_path / "fake.xlsx"
    not_a_zip.write_text("plain text")
    screen_office_files(str(not_a_zip), 10)  # not a zip: left to the metric


def test_the_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("VERL_CUA_METRIC_MEMORY", "2G")
    monkeypatch.setenv("VERL_CUA_METRIC_WALL_SECONDS", "30")
    limits = MetricLimits.from_env()
    assert (limits.memory, limits.wall_seconds, limits.cpu_seconds) == (2 << 30, 30.0, MetricLimits().cpu_seconds)
    assert MetricLimits().wall_seconds < 90  # under the env's evaluate_timeout


def test_a_child_that_cannot_start_is_our_failure_never_the_agents_zero(monkeypatch):
    from verl_cua.envs.osworld import metric_child

    monkeypatch.setattr(metric_child, "ENTRY", "verl_cua.envs.osworld.no_such_entry")
    with pytest.raises(metric_child.MetricChildBroken, match=r"failed to start \(exit 1\).*No module named"):
        call_metric("exact_match", ("a", {"expected": "a"}), {})
