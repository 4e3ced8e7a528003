"""The trainer's advantage step (`CuaTrainer.cua_advantages`) on a group that infra failures left with one valid
episode: GRPO's outcome part and GiGPO's step part are both exactly zero for it, and the infra rows too; a full group
beside it keeps its signal."""

import numpy as np
import pytest
import torch
from verl.protocol import DataProto

from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import AdvantageStep, plan_for
from verl_cua.integrations.verl.rows.fields import isolate_infra_uids
from verl_cua.integrations.verl.rows.step_fields import StepFields
from verl_cua.integrations.verl.trainer import CuaTrainer

L = 6  # response tokens: two turns of 3 model tokens


def _trainer(estimator: str) -> CuaTrainer:
    trainer = object.__new__(CuaTrainer)  # the advantage step reads only these
    trainer.estimator, trainer.cua = estimator, CuaConfig.from_mapping({})
    trainer.plan = plan_for(estimator, trainer.cua)
    return trainer


def _step(estimator: str):
    # group a: one valid episode (a success that saw the same screen twice) and three infra failures;
    # group b: two valid episodes, one success and one failure, on different screens
    uids = ["a", "a", "a", "a", "b", "b"]
    infra = [False, True, True, True, False, False]
    scores = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    extra = [
        {"cua_score": s, "cua_infra_failure": bad, "cua_anchors": ["s", "s"] if i == 0 else ["x", f"y{i}"],
         "cua_invalid_steps": [False, False]}
        for i, (s, bad) in enumerate(zip(scores, infra, strict=True))
    ]  # fmt: skip
    keys = [f"{u}_{i}_0" for i, u in enumerate(uids)]
    mask = torch.tensor([[1, 1, 1, 0, 1, 1]] * len(uids))  # two turns: an observation token between them
    rewards = torch.zeros(len(uids), L)
    rewards[:, -1] = torch.tensor(scores)
    data = DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_rewards": rewards,
                 "advantages": torch.zeros(len(uids), L), "returns": torch.zeros(len(uids), L)},
        non_tensors={"uid": np.array(isolate_infra_uids(uids, infra), dtype=object)},
    )  # fmt: skip
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    adv, ret = compute_grpo_outcome_advantage(rewards, mask.float(), data.non_tensor_batch["uid"])
    data.batch["advantages"], data.batch["returns"] = adv, ret
    fields = StepFields(tuple(keys), extra, uids, list(range(len(uids))), mask)
    batch = type("Batch", (), {"keys": keys, "partition_id": "train"})()
    cua = CuaConfig()
    return data, AdvantageStep(plan_for(estimator, cua), cua, batch, fields)


@pytest.mark.parametrize("estimator", ["grpo", "gigpo"])
def test_a_group_left_with_one_valid_episode_contributes_nothing(estimator):
    data, step = _step(estimator)
    assert data.batch["advantages"][0].abs().max() > 0.5  # verl alone: the lone survivor trains on its raw score
    metrics = {}
    _trainer(estimator).cua_advantages(data, step, metrics)
    adv = data.batch["advantages"]
    assert adv[:4].abs().max() == 0.0 and data.batch["returns"][:4].abs().max() == 0.0
    assert adv[4].max() > 0 > adv[5].min()  # the full group keeps its signal
    assert metrics["cua/groups_too_small"] == 1 and metrics["cua/infra_rows_masked"] == 3
    assert step.excluded == [True, True, True, True, False, False]  # what every hook read
