"""The estimator plan, decided once at start: which estimators run SDPO's teacher pass, which loss, which teacher
weights; `sdpo_grpo` never runs logit SDPO's top-k passes (it used to run both every step and drop them)."""

from types import SimpleNamespace

import pytest

from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import plan_for
from verl_cua.integrations.verl.trainer import CuaTrainer

LOGIT_EMA = {"sdpo": {"loss": "logit", "teacher": "ema", "ema_rate": 0.05}}


@pytest.mark.parametrize(
    ("estimator", "outcome", "teacher_pass", "loss", "weights", "rate"),
    [
        ("grpo", "grpo", False, None, False, 0.0),
        ("rloo", "rloo", False, None, False, 0.0),
        ("gigpo", "grpo", False, None, False, 0.0),
        ("sdpo", "grpo", True, "logit", True, 0.05),
        ("sdpo_grpo", "grpo", True, "token", True, 0.05),
    ],
)
def test_each_estimator_plans_its_step(estimator, outcome, teacher_pass, loss, weights, rate):
    plan = plan_for(estimator, CuaConfig.from_mapping(LOGIT_EMA))
    assert (plan.outcome_estimator, plan.teacher_pass, plan.sdpo_loss) == (outcome, teacher_pass, loss)
    assert (plan.weight_teacher, plan.ema_rate) == (weights, rate)
    assert plan.logit_loss == (loss == "logit")


def test_frozen_and_current_teachers_update_no_weights():
    frozen = plan_for("sdpo", CuaConfig.from_mapping({"sdpo": {"teacher": "frozen"}}))
    current = plan_for("sdpo", CuaConfig.from_mapping({"sdpo": {"teacher": "current"}}))
    assert (frozen.weight_teacher, frozen.ema_rate) == (True, 0.0)
    assert (current.weight_teacher, current.ema_rate) == (False, 0.0)


@pytest.mark.parametrize(("estimator", "topk_passes"), [("sdpo", True), ("sdpo_grpo", False)])
def test_the_teacher_pass_runs_top_k_passes_only_for_the_logit_loss(estimator, topk_passes, monkeypatch):
    """What the trainer hands the teacher pass: with the default `cua.sdpo.loss=logit`, sdpo_grpo's settings say
    token, so `run_teacher_pass` runs no student_topk / teacher_gather pass for it."""
    from verl_cua.integrations.verl import trainer as trainer_module

    seen = {}

    def record(actor_wg, builder, batch, fields, sdpo, temperature, **kwargs):
        seen.update(sdpo)
        return trainer_module.TeacherResult(reprompt=[], success=[])

    monkeypatch.setattr(trainer_module, "run_teacher_pass", record)
    monkeypatch.setattr(trainer_module, "TeacherContextBuilder", lambda tokenizer, processor: object())
    trainer = object.__new__(CuaTrainer)
    trainer.estimator, trainer.cua = estimator, CuaConfig.from_mapping({"sdpo": {"teacher": "current"}})
    trainer.plan, trainer.ema_teacher = plan_for(estimator, trainer.cua), False
    trainer._teacher_builder, trainer.timing_raw, trainer.success_buffer = None, {}, None
    trainer.tokenizer = trainer.processor = trainer.actor_rollout_wg = None
    trainer.config = SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=SimpleNamespace(temperature=1.0)))
    trainer._row_multiple = lambda: 1
    trainer.step_fields = SimpleNamespace(of=lambda batch: None)  # the step's fields: not read by `record`
    monkeypatch.setattr(trainer_module, "demos", lambda buffer: {})
    assert trainer.cua.sdpo.loss == "logit"  # the default
    trainer.teacher_pass(batch=None, metrics={})
    assert (seen["loss"] == "logit") == topk_passes
