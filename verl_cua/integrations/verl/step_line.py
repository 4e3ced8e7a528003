"""The one line a training step prints on the console, beside verl's full metrics: the step, success rate, mean
reward, invalid-action share, infra failures, the step's seconds and the time left at the mean rate of the steps this
process ran (a resumed run counts only its own)."""

from __future__ import annotations

import sys
import time
from typing import Any

HELDOUT_PREFIX = "val-core/"


class StepLines:
    """Prints `step_line` after each training step's metrics are complete (`CuaTrainer._compute_metrics`)."""

    def __init__(self, total: int | None, stream: Any = None):
        self.total, self.stream = total, stream or sys.stdout
        self.start: float | None = None
        self.first: int | None = None

    def print(self, step: int, metrics: dict[str, Any]) -> None:
        """One line for `step` (flushed at once: a log read while the run goes on shows it)."""
        now = time.monotonic()
        if self.start is None:  # the first step of this process: its own time starts before it
            self.start, self.first = now - float(metrics.get("timing_s/step", 0.0)), step - 1
        ran = step - self.first
        left = (now - self.start) / ran * (self.total - step) if self.total and ran > 0 else None
        print(step_line(step, self.total, metrics, left), file=self.stream, flush=True)


def step_line(step: int, total: int | None, metrics: dict[str, Any], left_s: float | None = None) -> str:
    """`verl-cua step 3/40: success 0.41, reward 0.41, invalid 0.06, 21 s, about 13 min left` (parts without
    a metric are left out; a held-out score of the step's validation is added)."""
    parts = []
    for label, key in (("success", "cua/success_rate"), ("reward", "critic/score/mean"),
                       ("invalid", "cua/invalid_action_rate")):  # fmt: skip
        if key in metrics:
            parts.append(f"{label} {float(metrics[key]):.2f}")
    if metrics.get("cua/infra_failures"):
        parts.append(f"infra failures {int(metrics['cua/infra_failures'])}")
    heldout = sorted(k for k in metrics if k.startswith(HELDOUT_PREFIX) and "/acc/mean@" in k)
    if heldout:
        parts.append(f"held-out {float(metrics[heldout[0]]):.2f}")
    if "timing_s/step" in metrics:
        parts.append(f"{float(metrics['timing_s/step']):.0f} s")
    if left_s is not None:
        parts.append(f"about {_duration(left_s)} left")
    of = f"/{total}" if total else ""
    return f"verl-cua step {step}{of}: {', '.join(parts)}"


def _duration(seconds: float) -> str:
    """`45 s`, `13 min`, `2.5 h`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
