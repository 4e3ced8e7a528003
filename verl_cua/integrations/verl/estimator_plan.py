"""What `algorithm.adv_estimator` and `cua.sdpo.*` ask of a training step, decided once at start: the trainer, the
teacher pass, the loss fields and the actor loss read this plan instead of testing estimator names. The estimators
themselves are listed once, in `verl_cua.algos.estimators`.

| estimator | outcome advantage | then | teacher pass | actor loss | top-k passes |
| --- | --- | --- | --- | --- | --- |
| grpo, gae, ... (verl's) | the estimator | nothing | no | ppo | no |
| gigpo | grpo | GiGPO's step advantage | no | ppo | no |
| sdpo | grpo | SDPO's signal, reprompted rows only | yes | sdpo (`cua.sdpo.loss`: logit or token) | with logit |
| sdpo_grpo | grpo | lambda-mix of SDPO's and GRPO's | yes | sdpo, token-level whatever `cua.sdpo.loss` | never |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl_cua.algos.estimators import ESTIMATORS

OUTCOME_ESTIMATOR = "grpo"  # ours build on GRPO's outcome advantage


@dataclass(frozen=True)
class EstimatorPlan:
    """One run's answers to "what does this step do" (see the module's table)."""

    estimator: str
    outcome_estimator: str  # the verl estimator whose advantages come first (ours build on GRPO's)
    step_advantage: str | None  # "sdpo", "gigpo" or None: the advantage step of ours that follows
    teacher_pass: bool  # SDPO's teacher pass runs, its successes buffered as demos
    sdpo_loss: str | None  # "logit" or "token" for SDPO's actor loss, None for verl's PPO loss
    grpo_mix: bool  # SDPO's advantage is mixed with GRPO's (every valid row trains, not only reprompted ones)
    weight_teacher: bool  # a host copy of the teacher's weights (ema, frozen) is swapped in for its pass
    ema_rate: float  # the EMA teacher's update rate after each actor update (0: none)

    @property
    def logit_loss(self) -> bool:
        """The logit-level SDPO loss: the top-k passes, their loss fields and the logits processor in the update."""
        return self.sdpo_loss == "logit"

    @property
    def reprompted_only(self) -> bool:
        """Only the rows the teacher reprompted carry SDPO's signal (plain SDPO; the GRPO mix trains every row)."""
        return self.teacher_pass and not self.grpo_mix

    def sdpo_settings(self, sdpo: Any) -> dict:
        """`cua.sdpo` as a dict with the loss this plan runs (what the teacher pass, fields and loss read)."""
        settings = dict(sdpo.to_dict() if hasattr(sdpo, "to_dict") else sdpo)
        settings["loss"] = self.sdpo_loss or "token"
        return settings


def plan_for(estimator: str, cua: Any) -> EstimatorPlan:
    """The plan for `algorithm.adv_estimator=estimator` under the typed `cua` config."""
    ours = ESTIMATORS.get(estimator)
    sdpo = ours is not None and ours.step_advantage == "sdpo"
    teacher = cua.sdpo.teacher if sdpo else None
    return EstimatorPlan(
        estimator=estimator,
        outcome_estimator=OUTCOME_ESTIMATOR if ours is not None else estimator,
        step_advantage=ours.step_advantage if ours is not None else None,
        teacher_pass=sdpo,
        sdpo_loss=(cua.sdpo.loss if ours.own_loss else "token") if sdpo else None,
        grpo_mix=ours is not None and ours.grpo_mix,
        weight_teacher=teacher in ("ema", "frozen"),
        ema_rate=float(cua.sdpo.ema_rate) if teacher == "ema" else 0.0,
    )
