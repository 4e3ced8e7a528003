"""The advantage estimators verl-cua adds, listed once: what each adds to GRPO's outcome advantage. The verl plug-in,
its start-up plan and config checks, the budget, the doctor and the verl-agent host all read this table. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimator:
    """What one of our estimators adds to verl's step (after GRPO's outcome advantage)."""

    step_advantage: str  # "sdpo" (the teacher's signal) or "gigpo" (step anchors)
    grpo_mix: bool = False  # the advantage mixes GRPO's back in (`cua.sdpo.grpo_lambda`)
    own_loss: bool = True  # SDPO's loss follows `cua.sdpo.loss`; False: always the token-level loss


ESTIMATORS: dict[str, Estimator] = {
    "sdpo": Estimator("sdpo"),
    "sdpo_grpo": Estimator("sdpo", grpo_mix=True, own_loss=False),
    "gigpo": Estimator("gigpo"),
}
SDPO_ESTIMATORS = tuple(name for name, e in ESTIMATORS.items() if e.step_advantage == "sdpo")
