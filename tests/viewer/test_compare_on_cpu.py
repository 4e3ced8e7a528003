"""`compare_runs` rows between two runs and the rich table `print_compare` prints."""

import io

import pytest
from rich.console import Console

from verl_cua.envs.trajectory import RUN, write_json
from verl_cua.testing.viewer_runs import act, write_episode, write_sample_runs
from verl_cua.viewer import compare_dirs, compare_runs, print_compare


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return write_sample_runs(tmp_path_factory.mktemp("runs"))


def row(task, a, b, winner=None):
    """A expected row from (status, score, steps) triples."""
    return {
        "task": task,
        "domain": task.rpartition("/")[0],
        "a_status": a[0],
        "a_score": a[1],
        "a_steps": a[2],
        "b_status": b[0],
        "b_score": b[1],
        "b_steps": b[2],
        "winner": winner,
    }


def console() -> Console:
    return Console(file=io.StringIO(), width=160, color_system=None)


def test_rows_are_the_tasks_whose_status_differs(runs):
    a, b = runs
    assert compare_runs(a, b) == [
        row("calc/calc-sum-column", ("success", 1.0, 3), ("failure", 0.0, 2), "a"),
        row("chrome/chrome-bookmark", ("failure", 0.0, 2), ("success", 1.0, 3), "b"),
        row("chrome/chrome-search", ("infra_failure", 0.0, 1), ("success", 1.0, 2)),
        row("writer/writer-only-baseline", ("failure", 0.25, 1), ("missing", None, None)),
        row("writer/writer-unfinished", ("failure", 0.0, 1), ("unfinished", None, 1)),
    ]


def test_swapping_the_runs_swaps_the_sides(runs):
    a, b = runs
    swapped = compare_runs(b, a)
    assert [r["task"] for r in swapped] == [r["task"] for r in compare_runs(a, b)]
    assert swapped[0]["a_status"] == "failure" and swapped[0]["b_status"] == "success" and swapped[0]["winner"] == "b"


def test_a_run_compared_with_itself_has_no_rows(runs):
    assert compare_runs(runs[0], runs[0]) == []


def test_print_compare_shows_the_table_and_the_count(runs):
    out = console()
    rows = compare_dirs(*runs, console=out)
    assert len(rows) == 5
    text = out.file.getvalue()
    lines = text.splitlines()
    assert lines[-1] == (
        "5 of 7 tasks differ: baseline better on 1, candidate better on 1, "
        "3 not comparable (infra failure, unfinished or missing)"
    )
    table = "\n".join(lines[:-1])
    for task in ("calc-sum-column", "chrome-bookmark", "chrome-search", "writer-only-baseline", "writer-unfinished"):
        assert task in table
    assert "writer-bold" not in table and "calc-chart" not in table  # same status in both runs
    sum_line = next(line for line in lines if "calc-sum-column" in line)
    assert sum_line.index("success") < sum_line.index("failure") and sum_line.rstrip().endswith("baseline")
    assert "infra failure 0 · 1 step" in text and "missing" in text


def test_print_compare_without_differences_prints_only_the_count():
    out = console()
    print_compare([], "a", "b", total=3, console=out)
    assert out.file.getvalue() == "0 of 3 tasks differ: a better on 0, b better on 0\n"


def test_run_names_are_printed_literally_not_as_rich_markup(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_json(a / RUN, {"name": "[bold red]x[/]"})
    write_episode(a, "d/t", [[act("done")]], "success")
    write_episode(b, "d/t", [[act("wait")]], "failure")
    out = console()
    compare_dirs(a, b, console=out)
    assert "[bold red]x[/] better on 1, b better on 0" in out.file.getvalue()
