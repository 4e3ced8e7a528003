"""A planner-mode step (`verl-cua eval --planner`, CODA) in a detail cell: the planner's thought and the action the
executor carried out, each labelled, and the executor's own reply; the step line's `executor` says it is one."""

from __future__ import annotations

from html import escape
from typing import Any

from verl_cua.viewer.overlay import describe_step

OUTCOME_NOTES = {
    "answer": "the planner's ANS answer: no executor call",
    "rejected": "the executor rejected the plan (the planner's invalid step)",
    "unavailable": "the executor failed (infra, not the planner's failure)",
}


def planner_record(step: dict[str, Any]) -> dict[str, Any] | None:
    """The step's `executor` record when it was made in planner mode, else None (an ordinary step)."""
    record = step.get("executor")
    return record if isinstance(record, dict) else None


def who(role: str) -> str:
    """The label of who wrote a part of the step: `planner` or `executor`."""
    return f'<span class="who {escape(role)}">{escape(role)}</span>'


def planner_parts(step: dict[str, Any], record: dict[str, Any], badge: str) -> list[str]:
    """The planner's thought, then the executed action (the executor's, or the planner's own answer), labelled."""
    action = step.get("action") if isinstance(step.get("action"), dict) else {}
    thought = str(action.get("thought") or "") or "(no thought)"
    outcome = str(record.get("outcome") or "")
    actor = "planner" if outcome == "answer" else "executor"
    parts = [
        f'<div class="thought planned">{who("planner")} {escape(thought)}</div>',
        f'<div class="act">{who(actor)}<code>{escape(describe_step(step))}</code>{badge}</div>',
    ]
    if outcome in OUTCOME_NOTES:
        css = "" if outcome == "answer" else " warn"
        parts.append(f'<div class="note{css}">{escape(OUTCOME_NOTES[outcome])}</div>')
    return parts


def executor_details(record: dict[str, Any]) -> str:
    """The executor's raw reply and the action line the planner's history shows, collapsed; "" without a reply."""
    if record.get("raw") is None:
        return ""
    by = " · ".join(escape(str(record[k])) for k in ("kind", "model") if record.get(k))
    line = escape(str(record.get("executed") or ""))
    return (
        f'<details class="raw executor"><summary>executor output{f" · {by}" if by else ""}</summary>'
        f"<pre>{escape(str(record['raw']))}</pre>"
        f'<div class="note">in the planner\'s history: <code>{line}</code></div></details>'
    )
