"""Infra-failed rows leave their GRPO group: siblings' advantages are what they would be without them."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl.protocol import DataProto
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

from verl_cua.integrations.verl.batch_rows import infra_rows, isolate_infra_uids


def _grpo(scores, uids, keys):
    L = 3
    rewards = torch.zeros(len(scores), L)
    rewards[:, -1] = torch.tensor(scores)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(len(scores), L)},
        non_tensors={"uid": np.array(uids, dtype=object)},
    )
    algo = OmegaConf.create({"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": True})
    out = compute_advantage_for_multi_trajectories(data, batch_keys=keys, adv_estimator="grpo", config=algo)
    return out.batch["advantages"][:, 0]


def test_infra_row_does_not_shift_its_group():
    # group "a": rewards 1, 0, and an infra failure (reward 0); group "b": 1, 0
    scores = [1.0, 0.0, 0.0, 1.0, 0.0]
    uids = ["a", "a", "a", "b", "b"]
    keys = ["a_0_0", "a_1_0", "a_2_0", "b_0_0", "b_1_0"]
    extra = [{"cua_infra_failure": False}] * 2 + [{"cua_infra_failure": True}] + [{}, None]
    infra = infra_rows(extra)
    assert infra == [False, False, True, False, False]
    adv = _grpo(scores, isolate_infra_uids(uids, infra), keys)
    clean = _grpo([1.0, 0.0, 1.0, 0.0], ["a", "a", "b", "b"], ["a_0_0", "a_1_0", "b_0_0", "b_1_0"])
    assert adv[[0, 1, 3, 4]].tolist() == pytest.approx(clean.tolist())
    assert adv[2].item() == 0.0  # singleton group with reward 0; the trainer also multiplies it by 0
    naive = _grpo(scores, uids, keys)  # what counting the failure as an agent failure would do
    assert naive[0].item() != pytest.approx(clean[0].item())


def test_isolated_uids_are_unique_per_row():
    uids = isolate_infra_uids(["u", "u", "u"], [True, True, False])
    assert len(set(uids[:2])) == 2 and uids[2] == "u"
