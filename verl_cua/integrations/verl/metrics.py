"""GUI-agent metrics from the agent loop's `extra_fields`, one dict per training row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def gui_metrics(extra_fields: Sequence[dict[str, Any] | None]) -> dict[str, float]:
    """Success, reward parts, invalid-action rate, infra failures, broken desktops and steps over a batch's episodes.

    A `step`-layout episode spans several rows; each episode counts once (its first row, `step_index` 0).
    """
    episodes = [e for e in extra_fields if e and "cua_success" in e and e.get("step_index", 0) == 0]
    if not episodes:
        return {}
    n = len(episodes)
    valid = [e for e in episodes if not e["cua_infra_failure"]]
    steps = sum(e["cua_steps"] for e in valid)
    invalid = sum(e["cua_invalid_actions"] for e in valid)
    out = {
        "cua/episodes": n,
        "cua/infra_failures": sum(1 for e in episodes if e["cua_infra_failure"]),
        # episodes whose agent broke its desktop after acting: failures scored 0 (in the rates), not infra failures
        "cua/desktop_broken": sum(1 for e in valid if e.get("cua_desktop_broken")),
        "cua/success_rate": sum(e["cua_success"] for e in valid) / len(valid) if valid else 0.0,
        "cua/score_mean": sum(e["cua_score"] for e in valid) / len(valid) if valid else 0.0,
        "cua/invalid_action_rate": invalid / steps if steps else 0.0,
        "cua/steps_mean": steps / len(valid) if valid else 0.0,
        "cua/truncated_rate": sum(e["cua_truncated"] for e in valid) / len(valid) if valid else 0.0,
        "cua/env_seconds_mean": sum(e["cua_env_seconds"] for e in episodes) / n,
        "cua/generate_seconds_mean": sum(e["cua_generate_seconds"] for e in episodes) / n,
    }
    calls = sum(e.get("cua_executor_calls", 0) for e in episodes)
    if calls or any(e.get("cua_planner_answers") for e in episodes):  # a planner's run (`cua.planner.mode`)
        out |= {
            "cua/executor_calls": calls,
            "cua/executor_failures": sum(e.get("cua_executor_failures", 0) for e in episodes),  # infra
            "cua/executor_rejected": sum(e.get("cua_executor_rejected", 0) for e in episodes),  # the planner's
            "cua/executor_seconds_mean": sum(e.get("cua_executor_seconds", 0.0) for e in episodes) / n,
            "cua/planner_answers": sum(e.get("cua_planner_answers", 0) for e in episodes),
        }
    return out
