"""What a planner episode's executor did (`cua_executor_*` extra fields), without verl: the metrics read it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class PlannerCounts:
    """What one episode's executor did, for the metrics: calls, failures (infra), rejections (the planner's),
    seconds, and answers that bypassed it."""

    calls: int = 0
    failures: int = 0
    rejected: int = 0
    seconds: float = 0.0
    answers: int = 0

    def fields(self) -> dict[str, Any]:
        """The episode's `cua_executor_*` extra fields."""
        return {
            "cua_executor_calls": self.calls,
            "cua_executor_failures": self.failures,
            "cua_executor_rejected": self.rejected,
            "cua_executor_seconds": self.seconds,
            "cua_planner_answers": self.answers,
        }


NO_PLANNER = PlannerCounts().fields()  # every row carries the fields, planner or not (verl stacks them per batch)
