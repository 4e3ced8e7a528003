"""What `algorithm.adv_estimator` and `cua.*` ask of a training step, decided once at start: the trainer, the agent
loop, the teacher pass, the loss fields, the actor loss, the config checks, the budget and the doctor read this plan
instead of testing estimator names. The estimators themselves are listed once, in `verl_cua.algos.estimators`; the
step hooks are the algorithm folders' (`hooks.StepHook`).

| estimator | outcome advantage | then (hooks) | teacher pass | actor loss | top-k passes |
| --- | --- | --- | --- | --- | --- |
| grpo, gae, ... (verl's) | the estimator | nothing | no | ppo | no |
| gigpo | grpo | GiGPO's step advantage | no | ppo | no |
| sdpo | grpo | SDPO's signal, reprompted rows only | yes | sdpo (`cua.sdpo.loss`: logit or token) | with logit |
| sdpo_grpo | grpo | lambda-mix of SDPO's and GRPO's | yes | sdpo, token-level whatever `cua.sdpo.loss` | never |

An add-on (`hooks.ADD_ONS`: CoSo) joins any row with PPO's loss when its section's `enable` is true."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verl_cua.algos.estimators import ESTIMATORS
from verl_cua.integrations.verl.hooks import ADD_ONS, StepHook, step_hook

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import CuaConfig
    from verl_cua.integrations.verl.rows.step_fields import StepFields

OUTCOME_ESTIMATOR = "grpo"  # ours build on GRPO's outcome advantage


@dataclass(frozen=True)
class EstimatorPlan:
    """One run's answers to "what does this step do" (see the module's table)."""

    estimator: str
    outcome_estimator: str  # the verl estimator whose advantages come first (ours build on GRPO's)
    hooks: tuple[StepHook, ...]  # ours after verl's estimator, in order: the estimator's step advantage, then add-ons
    teacher_pass: bool  # SDPO's teacher pass runs, its successes buffered as demos
    sdpo_loss: str | None  # "logit" or "token" for SDPO's actor loss (sdpo_grpo: token), None for verl's PPO loss
    grpo_mix: bool  # SDPO's advantage is mixed with GRPO's (every valid row trains, not only reprompted ones)
    host_teacher: bool  # a host fp32 copy of the teacher's weights (ema, frozen), swapped in for its pass, checkpointed
    ema_rate: float  # the EMA teacher's update rate after each actor update (0: none)

    @property
    def logit_loss(self) -> bool:
        """The logit-level SDPO loss: its loss fields and the logits processor in the update."""
        return self.sdpo_loss == "logit"

    @property
    def topk_passes(self) -> bool:
        """The teacher pass runs the logit loss's top-k passes (student_topk, teacher_gather)."""
        return self.teacher_pass and self.logit_loss

    @property
    def reprompted_only(self) -> bool:
        """Only the rows the teacher reprompted carry SDPO's signal (plain SDPO; the GRPO mix trains every row)."""
        return self.teacher_pass and not self.grpo_mix

    @property
    def needs_entropy(self) -> bool:
        """A hook's loss term reads the update's per-token entropy (CoSo's bonus)."""
        return any(h.entropy for h in self.hooks)

    def runs(self, name: str) -> bool:
        """Whether the step hook `name` runs in this plan."""
        return any(h.name == name for h in self.hooks)


def plan_for(estimator: str | None, cua: CuaConfig) -> EstimatorPlan:
    """The plan for `algorithm.adv_estimator=estimator` under the typed `cua` config."""
    ours = ESTIMATORS.get(estimator)
    hooks = [step_hook(ours.step_advantage)] if ours is not None else []
    hooks += [hook for hook in map(step_hook, ADD_ONS) if cua[hook.section].enable]
    sdpo = any(h.teacher_pass for h in hooks)
    teacher = cua.sdpo.teacher if sdpo else None
    return EstimatorPlan(
        estimator=str(estimator),
        outcome_estimator=OUTCOME_ESTIMATOR if ours is not None else str(estimator),
        hooks=tuple(hooks),
        teacher_pass=sdpo,
        sdpo_loss=(cua.sdpo.loss if ours.own_loss else "token") if sdpo else None,
        grpo_mix=ours is not None and ours.grpo_mix,
        host_teacher=teacher in ("ema", "frozen"),
        ema_rate=float(cua.sdpo.ema_rate) if teacher == "ema" else 0.0,
    )


@dataclass
class AdvantageStep:
    """What a step hook reads besides verl's batch: the run's plan and config, the batch's keys (its loss fields are
    written there), our rows' fields, the teacher pass's result, and which rows train on nothing."""

    plan: EstimatorPlan
    cua: CuaConfig
    batch: Any  # verl's KVBatchMeta: `keys`, `partition_id`
    fields: StepFields
    teacher: Any = None  # SDPO's TeacherResult when the plan runs the teacher pass
    excluded: list[bool] = field(default_factory=list)  # infra failures and groups left with fewer than 2 episodes
