"""`verl-cua compare`: the tasks whose status differs between two runs, as rows and as a rich table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_cua.viewer.detail import steps_text
from verl_cua.viewer.runs import Run, load_runs, split_key, task_keys

STYLES = {"success": "green", "failure": "red", "infra_failure": "yellow", "unfinished": "dim", "missing": "dim"}


def _side(run: Run, key: str) -> tuple[str, Any, int | None]:
    episode = run.episodes.get(key)
    if episode is None:
        return run.status(key), None, None
    return episode.status, (episode.result or {}).get("score"), len(episode.steps)


def winner(a_status: str, b_status: str) -> str | None:
    """`a` or `b` when one run succeeded and the other failed; None otherwise (infra failures are not failures)."""
    if a_status == "success" and b_status == "failure":
        return "a"
    if b_status == "success" and a_status == "failure":
        return "b"
    return None


def compare_runs(a: str | Path | Run, b: str | Path | Run) -> list[dict[str, Any]]:
    """Rows for the tasks whose status differs (or that only one run has), sorted by domain, then task id.

    A row: `task`, `domain`, `a_status`, `a_score`, `a_steps`, `b_status`, `b_score`, `b_steps` and `winner`
    (`a`, `b` or None); a status is success | failure | infra_failure | unfinished | missing.
    """
    run_a, run_b = (r if isinstance(r, Run) else load_runs([r])[0] for r in (a, b))
    rows = []
    for key in task_keys([run_a, run_b]):
        a_status, a_score, a_steps = _side(run_a, key)
        b_status, b_score, b_steps = _side(run_b, key)
        if a_status == b_status:
            continue
        rows.append(
            {
                "task": key,
                "domain": split_key(key)[0],
                "a_status": a_status,
                "a_score": a_score,
                "a_steps": a_steps,
                "b_status": b_status,
                "b_score": b_score,
                "b_steps": b_steps,
                "winner": winner(a_status, b_status),
            }
        )
    return rows


def summary_line(rows: list[dict[str, Any]], a_name: str, b_name: str, total: int | None = None) -> str:
    """`3 of 19 tasks differ: a better on 2, b better on 1` (plus the differences that neither run wins)."""
    a_wins = sum(row["winner"] == "a" for row in rows)
    b_wins = sum(row["winner"] == "b" for row in rows)
    other = len(rows) - a_wins - b_wins
    if total is not None:
        head = f"{len(rows)} of {total} tasks differ"
    else:
        head = f"{len(rows)} task differs" if len(rows) == 1 else f"{len(rows)} tasks differ"
    line = f"{head}: {a_name} better on {a_wins}, {b_name} better on {b_wins}"
    if other:
        line += f", {other} not comparable (infra failure, unfinished or missing)"
    return line


def _cell(status: str, score: Any, steps: int | None) -> str:
    from rich.markup import escape

    details = [
        f"{score:g}" if isinstance(score, (int, float)) else None,
        steps_text(steps) if steps is not None else None,
    ]
    text = " · ".join(d for d in details if d)
    return f"[{STYLES.get(status, 'default')}]{escape(status.replace('_', ' '))}[/] " + text


def print_compare(
    rows: list[dict[str, Any]], a_name: str, b_name: str, *, total: int | None = None, console: Any = None
) -> None:
    """Print the rows as a rich table and the one-line count (`total`: tasks in either run, for "N of M")."""
    from rich.markup import escape
    from rich.table import Table

    from verl_cua.eval.summary import wide_console

    console = console or wide_console()
    if rows:
        table = Table(show_edge=False, header_style="bold")
        for column in ("domain", "task", a_name, b_name, "better"):
            table.add_column(escape(column))
        for row in rows:
            better = {"a": a_name, "b": b_name}.get(row["winner"] or "", "")
            table.add_row(
                escape(row["domain"]),
                escape(split_key(row["task"])[1]),
                _cell(row["a_status"], row["a_score"], row["a_steps"]),
                _cell(row["b_status"], row["b_score"], row["b_steps"]),
                escape(better),
            )
        console.print(table)
    console.print(escape(summary_line(rows, a_name, b_name, total)), highlight=False)


def compare_dirs(a: str | Path, b: str | Path, *, console: Any = None) -> list[dict[str, Any]]:
    """Load two run directories, print their comparison (named by `run.json` or the folder) and return the rows."""
    run_a, run_b = load_runs([a, b])
    rows = compare_runs(run_a, run_b)
    print_compare(rows, run_a.name, run_b.name, total=len(task_keys([run_a, run_b])), console=console)
    return rows
