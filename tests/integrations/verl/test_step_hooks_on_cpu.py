"""A new estimator with a step advantage needs its folder's `HOOK` and one row of `algos.estimators.ESTIMATORS`, and no
spine file: the plan runs its hook after GRPO, the config checks know it and the trainer's advantage step applies it
(the plug-in's table follows the row: test_plugin_on_cpu). Here a `toy` folder is a module put in `sys.modules`."""

import sys
import types

import numpy as np
import pytest
import torch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from verl_cua.algos import estimators
from verl_cua.integrations.verl.config.checks import validate_estimator_config
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import AdvantageStep, plan_for
from verl_cua.integrations.verl.hooks import StepHook
from verl_cua.integrations.verl.rows.step_fields import StepFields
from verl_cua.integrations.verl.trainer import CuaTrainer

TOY = "verl_cua.integrations.verl.toy"


def _double(data, step):
    """The toy's step advantage: GRPO's doubled on the rows that train."""
    keep = torch.tensor([0.0 if out else 2.0 for out in step.excluded]).unsqueeze(-1)
    data.batch["advantages"] = data.batch["advantages"] * keep
    return {"toy/rows": float(len(step.excluded))}


@pytest.fixture
def toy(monkeypatch):
    folder = types.ModuleType(TOY)
    folder.HOOK = StepHook(name="toy", section=None, step=f"{__name__}:_double")
    monkeypatch.setitem(sys.modules, TOY, folder)
    monkeypatch.setitem(estimators.ESTIMATORS, "toy", estimators.Estimator("toy"))
    return folder.HOOK


def test_a_new_estimators_hook_runs_after_grpo_beside_an_add_on(toy):
    plan = plan_for("toy", CuaConfig.from_mapping({"coso": {"enable": True}}))
    assert plan.outcome_estimator == "grpo" and [h.name for h in plan.hooks] == ["toy", "coso"]
    assert not plan.teacher_pass and plan.sdpo_loss is None and toy.settings(CuaConfig()) is None
    validate_estimator_config({"algorithm": {"adv_estimator": "toy"}, "cua": {"coso": {"enable": True}}})
    with pytest.raises(CuaConfigError, match=r"cua.gigpo.gamma is set but algorithm.adv_estimator=toy"):
        validate_estimator_config({"algorithm": {"adv_estimator": "toy"}, "cua": {"gigpo": {"gamma": 0.5}}})


def test_the_trainers_advantage_step_applies_the_new_hook(toy):
    mask, rewards = torch.ones(2, 2), torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    uids = np.array(["g", "g"], dtype=object)
    adv, ret = compute_grpo_outcome_advantage(rewards, mask, uids)
    data = DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_rewards": rewards, "advantages": adv, "returns": ret},
        non_tensors={"uid": uids},
    )
    trainer = object.__new__(CuaTrainer)
    trainer.cua = CuaConfig()
    trainer.plan = plan_for("toy", trainer.cua)
    keys = ["g_0_0", "g_1_0"]
    batch = type("Batch", (), {"keys": keys, "partition_id": "train"})()
    step = AdvantageStep(trainer.plan, trainer.cua, batch, StepFields(tuple(keys), [{}, {}], ["g"] * 2, [0, 1], mask))
    metrics = {}
    trainer.cua_advantages(data, step, metrics)
    assert torch.allclose(data.batch["advantages"], 2 * adv) and metrics["toy/rows"] == 2.0
