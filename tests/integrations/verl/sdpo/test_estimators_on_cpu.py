"""SDPO's estimators through verl's own registries, on hand-computed tensors: sdpo, sdpo_grpo and the `sdpo` policy
loss; without the trainer's extra inputs they refuse with one line (GiGPO's: tests/integrations/verl/gigpo/)."""

import math

import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn

from verl_cua.integrations.verl.plugin import register_estimators
from verl_cua.integrations.verl.sdpo import policy_loss as sdpo_loss

register_estimators()  # sdpo, sdpo_grpo, gigpo; loss sdpo


def test_sdpo_is_teacher_minus_student_on_reprompted_model_tokens():
    teacher = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, -1.0]])
    student = torch.tensor([[-1.5, -1.0, -0.5], [-2.0, -2.0, -2.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv, ret = get_adv_estimator_fn("sdpo")(
        token_level_rewards=torch.zeros(2, 3),
        response_mask=mask,
        index=np.array(["a", "a"], dtype=object),
        teacher_log_probs=teacher,
        old_log_probs=student,
        reprompt=torch.tensor([True, False]),
    )
    assert adv.tolist() == [[0.5, -1.0, 0.0], [0.0, 0.0, 0.0]]
    assert torch.equal(adv, ret)


def test_sdpo_grpo_mixes_grpo_and_sdpo_advantages_on_every_row():
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    mask = torch.ones(3, 2)
    teacher = torch.tensor([[-1.0, -1.0], [-0.2, -0.4], [-3.0, -3.0]])
    student = torch.tensor([[-1.0, -1.0], [-1.2, -0.4], [-1.0, -1.0]])
    adv, _ = get_adv_estimator_fn("sdpo_grpo")(
        token_level_rewards=rewards,
        response_mask=mask,
        index=np.array(["g", "g", "g"], dtype=object),
        teacher_log_probs=teacher,
        old_log_probs=student,
        reprompt=torch.tensor([False, True, True]),
        grpo_lambda=0.9,
        config={"norm_adv_by_std_in_grpo": True},
    )
    # GRPO on scores [1, 0, 0]: mean 1/3, unbiased std sqrt(1/3) -> 1.1547 for the success, -0.5774 for failures;
    # SDPO: 0 on the row not reprompted, log q - log p = [1.0, 0.0] and [-2.0, -2.0] on the others
    assert adv[0].tolist() == pytest.approx([0.9 * 1.1547, 0.9 * 1.1547], abs=1e-4)
    assert adv[1].tolist() == pytest.approx([0.9 * -0.57735 + 0.1 * 1.0, 0.9 * -0.57735], abs=1e-4)
    assert adv[2].tolist() == pytest.approx([0.9 * -0.57735 + 0.1 * -2.0] * 2, abs=1e-4)


@pytest.mark.parametrize("name", ["sdpo", "sdpo_grpo"])
def test_without_the_trainer_inputs_the_estimators_refuse_in_one_line(name):
    with pytest.raises(ValueError) as err:
        get_adv_estimator_fn(name)(
            token_level_rewards=torch.zeros(1, 2), response_mask=torch.ones(1, 2), index=np.array(["a"])
        )
    assert "python -m verl_cua.main" in str(err.value) and "\n" not in str(err.value)


def test_sdpo_policy_loss_truncates_the_importance_weight():
    old = torch.tensor([[0.0, 0.0]])
    new = torch.tensor([[math.log(3.0), math.log(0.5)]], requires_grad=True)
    adv = torch.tensor([[1.0, 2.0]])
    sdpo_loss.IS_CLIP = 2.0
    loss, metrics = get_policy_loss_fn("sdpo")(
        old_log_prob=old, log_prob=new, advantages=adv, response_mask=torch.ones(1, 2), loss_agg_mode="token-mean"
    )
    # per token -w*A*logp with w = min(ratio, 2) detached: w = [2, 0.5]; token-mean over 2 tokens
    expected = -(2.0 * 1.0 * math.log(3.0) + 0.5 * 2.0 * math.log(0.5)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert new.grad[0].tolist() == pytest.approx([-1.0, -0.5])  # d/dlogp = -w*A/2
    assert metrics["sdpo/is_clip_frac"] == pytest.approx(0.5)
