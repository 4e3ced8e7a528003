"""What `algorithm.adv_estimator` and `cua.sdpo.*` ask of a training step, decided once at start: the trainer, the
teacher pass, the loss fields and the actor loss read this plan instead of testing estimator names.

| estimator | outcome advantage | teacher pass | actor loss | top-k passes |
| --- | --- | --- | --- | --- |
| grpo, gae, ... (verl's) | the estimator | no | ppo | no |
| gigpo | grpo | no | ppo | no |
| sdpo | grpo | yes | sdpo (`cua.sdpo.loss`: logit or token) | with the logit loss |
| sdpo_grpo | grpo | yes | sdpo, token-level whatever `cua.sdpo.loss` says | never |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl_cua.integrations.verl.cua_config import CUA_ESTIMATORS, SDPO_ESTIMATORS


@dataclass(frozen=True)
class EstimatorPlan:
    """One run's answers to "what does this step do" (see the module's table)."""

    estimator: str
    outcome_estimator: str  # the verl estimator whose advantages come first (ours build on GRPO's)
    teacher_pass: bool  # SDPO's teacher pass runs, its successes buffered as demos
    sdpo_loss: str | None  # "logit" or "token" for SDPO's actor loss, None for verl's PPO loss
    weight_teacher: bool  # a host copy of the teacher's weights (ema, frozen) is swapped in for its pass
    ema_rate: float  # the EMA teacher's update rate after each actor update (0: none)

    @property
    def logit_loss(self) -> bool:
        """The logit-level SDPO loss: the top-k passes, their loss fields and the logits processor in the update."""
        return self.sdpo_loss == "logit"

    def sdpo_settings(self, sdpo: Any) -> dict:
        """`cua.sdpo` as a dict with the loss this plan runs (what the teacher pass, fields and loss read)."""
        settings = dict(sdpo.to_dict() if hasattr(sdpo, "to_dict") else sdpo)
        settings["loss"] = self.sdpo_loss or "token"
        return settings


def plan_for(estimator: str, cua: Any) -> EstimatorPlan:
    """The plan for `algorithm.adv_estimator=estimator` under the typed `cua` config."""
    sdpo = estimator in SDPO_ESTIMATORS
    teacher = cua.sdpo.teacher if sdpo else None
    return EstimatorPlan(
        estimator=estimator,
        outcome_estimator="grpo" if estimator in CUA_ESTIMATORS else estimator,
        teacher_pass=sdpo,
        sdpo_loss=(cua.sdpo.loss if estimator == "sdpo" else "token") if sdpo else None,
        weight_teacher=teacher in ("ema", "frozen"),
        ema_rate=float(cua.sdpo.ema_rate) if teacher == "ema" else 0.0,
    )
