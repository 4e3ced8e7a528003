"""bench.api_gui: a task it cannot run (not an office task) stops it in one line before any desktop starts; on the
local desktop (`desktop`), one office task by both approaches, keyboard and
API, solved and summarised."""

import json

from bench import api_gui


def test_a_task_that_is_not_an_office_task_is_one_line_before_any_desktop(capsys, tmp_path):
    out = tmp_path / "api_gui.json"
    assert api_gui.main(["--tasks", "calc-sum-column,chrome-open-new-tab", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("bench.api_gui: unknown office task(s) chrome-open-new-tab;")
    assert "calc-sum-column" in err.split("valid: ")[1] and not out.exists()


def test_one_office_task_by_both_approaches_on_the_local_desktop(local_desktop, tmp_path, capsys):
    out = tmp_path / "api_gui.json"
    assert api_gui.main(["--tasks", "calc-bold-header", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (row,) = record["rows"]
    for approach in ("gui", "api"):
        assert row[approach]["success"] and row[approach]["score"] == 1.0 and row[approach]["seconds"] > 0
    assert all(r and not r.startswith("error:") for r in row["api"]["api_results"])  # each API call answered
    assert row["api"]["steps"] < row["gui"]["steps"]  # one call a step against keystrokes
    assert record["summary"]["api"] == {"successes": 1, "tasks": 1, "steps_per_success": row["api"]["steps"],
                                        "seconds_total": row["api"]["seconds"]}  # fmt: skip
    assert "gui: 1/1 solved" in capsys.readouterr().out
