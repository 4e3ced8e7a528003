"""A group that infra failures left with fewer than 2 valid episodes contributes exactly zero GRPO advantage (verl
0.9.1 alone gives its lone survivor its raw score), and `cua/groups_too_small` counts such groups."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl.protocol import DataProto
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

from verl_cua.integrations.verl.rows.fields import isolate_infra_uids
from verl_cua.integrations.verl.rows.thin_groups import settle_groups, small_groups


def _step(scores, uids, infra, estimator="grpo", settle=True):
    """The trainer's advantage step on one scored row per session: infra rows isolated, verl's estimator, then
    (with `settle`) `settle_groups`. Returns the first column of advantages and returns, and the metrics."""
    keys, counters = [], {}
    for u in uids:
        counters[u] = counters.get(u, -1) + 1
        keys.append(f"{u}_{counters[u]}_0")
    rewards = torch.zeros(len(scores), 3)
    rewards[:, -1] = torch.tensor(scores, dtype=torch.float32)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(len(scores), 3)},
        non_tensors={"uid": np.array(isolate_infra_uids(list(uids), list(infra)), dtype=object)},
    )
    algo = OmegaConf.create({"adv_estimator": estimator, "norm_adv_by_std_in_grpo": True})
    data = compute_advantage_for_multi_trajectories(data, batch_keys=keys, adv_estimator=estimator, config=algo)
    metrics = settle_groups(data, keys, estimator, infra) if settle else {}
    return data.batch["advantages"][:, 0].clone(), data.batch["returns"][:, 0].clone(), metrics


# group "a": one valid episode (score 1) and three killed ones; group "b": four valid episodes
SCORES = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
UIDS = ["a"] * 4 + ["b"] * 4
INFRA = [False, True, True, True, False, False, False, False]


def test_verl_alone_trains_the_lone_survivor_on_its_raw_score():
    adv, _, _ = _step(SCORES, UIDS, INFRA, settle=False)
    assert adv[0].item() == pytest.approx(1.0)  # mean 0, std 1 for a group of one: the bug this module fixes


def test_a_group_left_with_one_valid_episode_gets_zero_and_is_counted():
    adv, ret, metrics = _step(SCORES, UIDS, INFRA)
    assert adv[:4].tolist() == [0.0] * 4 and ret[:4].tolist() == [0.0] * 4
    assert metrics["cua/groups_too_small"] == 1
    # the intact group keeps verl's advantages exactly
    clean, _, _ = _step(SCORES[4:], UIDS[4:], INFRA[4:], settle=False)
    assert adv[4:].tolist() == clean.tolist() and adv[4:].abs().max().item() > 0.5


def test_a_group_of_only_infra_failures_is_counted_too():
    _, _, metrics = _step([0.0, 0.0, 1.0, 0.0], ["a", "a", "b", "b"], [True, True, False, False])
    assert metrics["cua/groups_too_small"] == 1


def test_two_valid_episodes_are_enough():
    adv, _, metrics = _step([1.0, 0.0, 0.0], ["a"] * 3, [False, False, True])
    assert metrics["cua/groups_too_small"] == 0
    assert adv[0].item() > 0.5 > -0.5 > adv[1].item()


def test_groups_of_one_by_design_are_left_to_verl():
    # rollout.n=1: no group lost a member, so nothing is settled here
    adv, _, metrics = _step([1.0, 0.0], ["a", "b"], [False, False])
    assert metrics["cua/groups_too_small"] == 0 and adv[0].item() == pytest.approx(1.0)


def test_other_estimators_keep_their_values_but_the_metric_counts():
    settled, _, metrics = _step(SCORES, UIDS, INFRA, estimator="rloo")
    raw, _, _ = _step(SCORES, UIDS, INFRA, estimator="rloo", settle=False)
    assert settled.tolist() == raw.tolist() and metrics["cua/groups_too_small"] == 1


def test_step_layout_counts_sessions_not_rows():
    # a lone survivor with three rows (step layout: `{uid}_{session}_{index}`) beside one killed session
    keys = ["a_0_0", "a_0_1", "a_0_2", "a_1_0"]
    rows, count = small_groups(keys, ["a", "a", "a", "a::infra3"], [False, False, False, True])
    assert rows == [True] * 4 and count == 1
    rows, count = small_groups(keys[:3], ["a"] * 3, [False] * 3)  # one session, no loss: not a small group
    assert rows == [False] * 3 and count == 0
