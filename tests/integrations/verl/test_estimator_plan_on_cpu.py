"""The estimator plan, decided once at start: which step hooks run, which estimators run SDPO's teacher pass, which
loss, which teacher weights; `sdpo_grpo` never runs logit SDPO's top-k passes (it used to run both every step and drop
them)."""

from types import SimpleNamespace

import pytest

from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import plan_for
from verl_cua.integrations.verl.trainer import CuaTrainer

LOGIT_EMA = {"sdpo": {"loss": "logit", "teacher": "ema", "ema_rate": 0.05}}


@pytest.mark.parametrize(
    ("estimator", "outcome", "hooks", "teacher_pass", "loss", "weights", "rate"),
    [
        ("grpo", "grpo", [], False, None, False, 0.0),
        ("rloo", "rloo", [], False, None, False, 0.0),
        ("gigpo", "grpo", ["gigpo"], False, None, False, 0.0),
        ("sdpo", "grpo", ["sdpo"], True, "logit", True, 0.05),
        ("sdpo_grpo", "grpo", ["sdpo"], True, "token", True, 0.05),
    ],
)
def test_each_estimator_plans_its_step(estimator, outcome, hooks, teacher_pass, loss, weights, rate):
    plan = plan_for(estimator, CuaConfig.from_mapping(LOGIT_EMA))
    assert (plan.outcome_estimator, plan.teacher_pass, plan.sdpo_loss) == (outcome, teacher_pass, loss)
    assert [hook.name for hook in plan.hooks] == hooks
    assert (plan.host_teacher, plan.ema_rate) == (weights, rate)
    assert plan.logit_loss == plan.topk_passes == (loss == "logit")


def test_frozen_and_current_teachers_update_no_weights():
    frozen = plan_for("sdpo", CuaConfig.from_mapping({"sdpo": {"teacher": "frozen"}}))
    current = plan_for("sdpo", CuaConfig.from_mapping({"sdpo": {"teacher": "current"}}))
    assert (frozen.host_teacher, frozen.ema_rate) == (True, 0.0)
    assert (current.host_teacher, current.ema_rate) == (False, 0.0)


@pytest.mark.parametrize(("estimator", "hooks"), [("grpo", ["coso"]), ("gigpo", ["gigpo", "coso"])])
def test_an_add_on_follows_the_estimators_own_hook_when_its_section_enables_it(estimator, hooks):
    plan = plan_for(estimator, CuaConfig.from_mapping({"coso": {"enable": True}}))
    assert [hook.name for hook in plan.hooks] == hooks and plan.needs_entropy and plan.runs("coso")
    assert not plan_for(estimator, CuaConfig()).runs("coso")  # off by default


def test_the_plan_pickles_with_its_hooks_and_sections_for_the_workers_loss():
    """`set_loss_fn` ships the loss to Ray workers with the plan and the typed config: both must pickle."""
    import pickle
    from functools import partial

    from verl_cua.integrations.verl.actor_loss import cua_actor_loss

    cua = CuaConfig.from_mapping({**LOGIT_EMA, "coso": {"enable": True}})
    loss = partial(cua_actor_loss, config=None, mode="ppo", plan=plan_for("gigpo", cua), cua=cua)
    back = pickle.loads(pickle.dumps(loss))
    assert back.keywords["plan"] == loss.keywords["plan"] and back.keywords["cua"].sdpo == cua.sdpo


def test_every_step_hook_is_declared_without_torch_or_verl():
    """The doctor, the checks and the budget read the hooks before Ray starts: each folder's `HOOK` imports light."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "for name in ('torch', 'verl', 'ray'): sys.modules[name] = None\n"
        "from verl_cua.algos.estimators import step_advantages\n"
        "from verl_cua.integrations.verl.hooks import ADD_ONS, step_hook\n"
        "hooks = [step_hook(n) for n in (*step_advantages(), *ADD_ONS)]\n"
        "print(sorted(h.name for h in hooks))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['coso', 'gigpo', 'sdpo']"


@pytest.mark.parametrize(("estimator", "topk_passes"), [("sdpo", True), ("sdpo_grpo", False)])
def test_the_teacher_pass_runs_top_k_passes_only_for_the_logit_loss(estimator, topk_passes, monkeypatch):
    """What the trainer hands the teacher pass: with the default `cua.sdpo.loss=logit`, sdpo_grpo's plan says token
    (`plan.topk_passes` is False), so `run_teacher_pass` runs no student_topk / teacher_gather pass for it."""
    from verl_cua.integrations.verl import trainer as trainer_module

    seen = {}

    def record(actor_wg, builder, batch, fields, plan, sdpo, temperature, **kwargs):
        seen.update(topk_passes=plan.topk_passes, loss=sdpo.loss)
        return trainer_module.TeacherResult(reprompt=[], success=[])

    monkeypatch.setattr(trainer_module, "run_teacher_pass", record)
    monkeypatch.setattr(trainer_module, "TeacherContextBuilder", lambda tokenizer, processor: object())
    trainer = object.__new__(CuaTrainer)
    trainer.estimator, trainer.cua = estimator, CuaConfig.from_mapping({"sdpo": {"teacher": "current"}})
    trainer.plan = plan_for(estimator, trainer.cua)
    trainer._teacher_builder, trainer.timing_raw, trainer.success_buffer = None, {}, None
    trainer.tokenizer = trainer.processor = trainer.actor_rollout_wg = None
    trainer.config = SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=SimpleNamespace(temperature=1.0)))
    trainer._row_multiple = lambda: 1
    trainer.step_fields = SimpleNamespace(of=lambda batch: None)  # the step's fields: not read by `record`
    monkeypatch.setattr(trainer_module, "demos", lambda buffer: {})
    assert trainer.cua.sdpo.loss == "logit"  # the default
    trainer.teacher_pass(batch=None, metrics={})
    assert seen == {"topk_passes": topk_passes, "loss": "logit"}  # the section as set, the plan's word on top-k
