"""GiGPO's estimator through verl's own registry, on hand-computed tensors: episode rows (steps from the mask's turns)
and step rows of one episode; without the agent loop's anchors it refuses with one line."""

import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from verl_cua.integrations.verl.gigpo.estimator import turn_steps
from verl_cua.integrations.verl.plugin import register_estimators

register_estimators()  # gigpo among them


def test_gigpo_adds_step_groups_of_identical_screens_to_the_episode_advantage():
    # one group, two episodes of 2 steps; both start on screen "s0"; episode 0 succeeds (reward 1), 1 fails
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]])
    steps = turn_steps(mask)
    assert steps.tolist() == [[0, -1, 1, 1], [0, 0, -1, 1]]
    metrics = {}
    adv, _ = get_adv_estimator_fn("gigpo")(
        token_level_rewards=rewards,
        response_mask=mask,
        index=np.array(["g", "g"], dtype=object),
        step_anchors=[["s0", "s1"], ["s0", "s2"]],
        token_steps=steps,
        gamma=0.5,
        step_weight=1.0,
        norm="mean",
        metrics=metrics,
    )
    # episode: rewards [1, 0] -> A^E = [0.5, -0.5]; step returns (gamma 0.5): ep0 [0.5, 1], ep1 [0, 0]
    # step group {s0}: returns [0.5, 0] -> A^S = [0.25, -0.25]; s1, s2 are singletons -> 0
    assert adv[0].tolist() == pytest.approx([0.75, 0.0, 0.5, 0.5])
    assert adv[1].tolist() == pytest.approx([-0.75, -0.75, 0.0, -0.5])
    assert metrics["gigpo/step_groups"] == 1.0


def test_gigpo_step_rows_share_their_episode():
    # step layout: rows 0,1 are steps 0,1 of episode (g, 0); rows 2,3 of (g, 1); every row carries the episode reward
    rewards = torch.tensor([[1.0], [1.0], [0.0], [0.0]])
    mask = torch.ones(4, 1)
    steps = torch.tensor([[0], [1], [0], [1]])
    adv, _ = get_adv_estimator_fn("gigpo")(
        token_level_rewards=rewards,
        response_mask=mask,
        index=np.array(["g"] * 4, dtype=object),
        step_anchors=[["a", "b"]] * 2 + [["a", "b"]] * 2,
        token_steps=steps,
        episodes=[("g", 0), ("g", 0), ("g", 1), ("g", 1)],
        gamma=1.0,
        norm="mean",
    )
    # A^E = [0.5, -0.5]; returns ep0 [1, 1], ep1 [0, 0]; groups {a}, {b}: A^S = [0.5, -0.5] each
    assert adv.flatten().tolist() == pytest.approx([1.0, 1.0, -1.0, -1.0])


def test_without_the_agent_loops_anchors_gigpo_refuses_in_one_line():
    with pytest.raises(ValueError) as err:
        get_adv_estimator_fn("gigpo")(
            token_level_rewards=torch.zeros(1, 2), response_mask=torch.ones(1, 2), index=np.array(["a"])
        )
    assert "python -m verl_cua.main" in str(err.value) and "\n" not in str(err.value)
