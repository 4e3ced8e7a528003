"""SDPO: token advantages, IS weights, policy-loss gradient, top-k logit divergences, reprompt planning."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.algos.sdpo import (
    demo_sources,
    reprompt_mask,
    sdpo_grpo_advantages,
    sdpo_logit_loss,
    sdpo_policy_loss,
    sdpo_token_advantages,
    topk_log_probs,
    truncated_is_weight,
)

LN2, LN3 = math.log(2.0), math.log(3.0)


def close(actual: torch.Tensor, expected: list) -> bool:
    """Elementwise closeness of a tensor to nested literal numbers."""
    return torch.allclose(actual.detach().double(), torch.tensor(expected, dtype=torch.float64), atol=1e-5)


def test_token_advantages_masked_by_response_and_reprompt():
    teacher = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -1.0, -1.0]], requires_grad=True)
    student = torch.tensor([[-2.0, -2.0, -1.0], [-1.0, -1.0, -1.0]])
    response_mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    # row 0: (-1) - (-2) = 1, (-2) - (-2) = 0, third token masked; row 1 was not reprompted: all 0.
    adv = sdpo_token_advantages(teacher, student, response_mask, torch.tensor([True, False]))
    assert adv.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert not adv.requires_grad


def test_token_advantages_ignore_padding_infinities():
    teacher = torch.tensor([[-1.0, -math.inf]])
    student = torch.tensor([[-1.5, -math.inf]])
    adv = sdpo_token_advantages(teacher, student, torch.tensor([[1, 0]]), torch.tensor([True]))
    assert adv.tolist() == [[0.5, 0.0]]


def test_truncated_is_weight():
    old = torch.zeros(4)
    # ratios e^0 = 1, e^ln3 = 3 -> capped at 2, e^-ln2 = 0.5, e^100 -> e^20 -> capped at 2.
    log_prob = torch.tensor([0.0, LN3, -LN2, 100.0], requires_grad=True)
    w = truncated_is_weight(log_prob, old, 2.0)
    assert w.tolist() == pytest.approx([1.0, 2.0, 0.5, 2.0])
    assert not w.requires_grad
    # the log-ratio is clamped at 20 before exp: e^20 = 4.85165e8.
    assert truncated_is_weight(log_prob, old, 1e12)[3].item() == pytest.approx(4.85165e8, rel=1e-5)
    assert truncated_is_weight(log_prob, old, None).tolist() == [1.0, 1.0, 1.0, 1.0]


def test_policy_loss_values_gradient_and_metrics():
    log_prob = torch.tensor([[-1.0, -0.5, -2.0, -1.0]], requires_grad=True)
    # ratios: 1, 3 (capped to 2), 0.5, and 20 on a masked-out token that must not count.
    old = torch.tensor([[-1.0, -0.5 - LN3, -2.0 + LN2, -1.0 - math.log(20.0)]])
    adv = torch.tensor([[1.0, 2.0, -1.0, 5.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    loss, metrics = sdpo_policy_loss(log_prob, old, adv, mask, is_clip=2.0)
    # -w * A * log_prob: -(1)(1)(-1) = 1, -(2)(2)(-0.5) = 2, -(0.5)(-1)(-2) = -1, masked 0.
    assert close(loss, [[1.0, 2.0, -1.0, 0.0]])
    # weight mean over masked tokens (1 + 2 + 0.5) / 3 = 1.16667; one of three raw ratios (3) exceeds 2.
    assert metrics["sdpo/is_weight_mean"] == pytest.approx(1.16667, abs=1e-4)
    assert metrics["sdpo/is_clip_frac"] == pytest.approx(1 / 3)
    loss.sum().backward()
    # d/d log_prob = -w * A: -1, -4, 0.5 (the IS weight is detached), 0 when masked.
    assert close(log_prob.grad, [[-1.0, -4.0, 0.5, 0.0]])


def test_policy_loss_rollout_weights_and_no_clip():
    log_prob = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    rollout_w = torch.tensor([[0.5, 1.5]])
    loss, metrics = sdpo_policy_loss(
        log_prob, log_prob.detach(), torch.tensor([[2.0, 1.0]]), torch.ones(1, 2), None, rollout_w
    )
    # w = 1 * rollout weight: -(0.5)(2)(-1) = 1, -(1.5)(1)(-2) = 3.
    assert close(loss, [[1.0, 3.0]])
    assert metrics == {"sdpo/is_weight_mean": pytest.approx(1.0), "sdpo/is_clip_frac": 0.0}
    loss.sum().backward()
    assert close(log_prob.grad, [[-1.0, -1.5]])


def test_policy_loss_with_empty_mask_is_zero():
    log_prob = torch.tensor([[-1.0]], requires_grad=True)
    loss, metrics = sdpo_policy_loss(log_prob, log_prob.detach(), torch.ones(1, 1), torch.zeros(1, 1), 2.0)
    assert loss.tolist() == [[0.0]] and metrics["sdpo/is_weight_mean"] == 0.0


def test_topk_log_probs_hand_values():
    # probabilities [1, 2, 3, 4] / 10: logsumexp = ln 10; top-2 = ids 3, 2 with ln 0.4, ln 0.3.
    logits = torch.log(torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
    logp, ids = topk_log_probs(logits, k=2)
    assert ids.tolist() == [[3, 2]]
    assert close(logp, [[math.log(0.4), math.log(0.3)]])
    logp, ids = topk_log_probs(logits + 7.0, ids=torch.tensor([[0]]))  # shift-invariant; given ids used as is
    assert ids.tolist() == [[0]] and logp.item() == pytest.approx(math.log(0.1), abs=1e-6)
    with pytest.raises(ValueError, match="top-k"):
        topk_log_probs(logits)


def test_topk_log_probs_match_log_softmax_on_batch():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 11)
    logp, ids = topk_log_probs(logits, k=4)
    assert ids.shape == (2, 3, 4)
    assert torch.allclose(logp, torch.log_softmax(logits, -1).gather(-1, ids), atol=1e-6)


def test_logit_loss_hand_values():
    ln = math.log
    s = torch.tensor([ln(0.5), ln(0.5)])
    q = torch.tensor([ln(0.25), ln(0.75)])
    # alpha 0: KL(q||s) = 0.25 ln(0.5) + 0.75 ln(1.5) = -0.173287 + 0.304099 = 0.130812
    assert sdpo_logit_loss(s, q, 0.0, add_tail=False).item() == pytest.approx(0.130812, abs=1e-5)
    # alpha 1: KL(s||q) = 0.5 ln 2 + 0.5 ln(2/3) = 0.346574 - 0.202733 = 0.143841
    assert sdpo_logit_loss(s, q, 1.0, add_tail=False).item() == pytest.approx(0.143841, abs=1e-5)
    # alpha 0.5: M = [0.375, 0.625]; KL(s||M) = 0.5 ln(4/3) + 0.5 ln(0.8) = 0.032269,
    # KL(q||M) = 0.25 ln(2/3) + 0.75 ln(1.2) = 0.035375; loss = (0.032269 + 0.035375) / 2 = 0.033822
    assert sdpo_logit_loss(s, q, 0.5, add_tail=False).item() == pytest.approx(0.033822, abs=1e-5)
    # tail: student top-2 [0.5, 0.25] + tail 0.25, teacher [0.25, 0.25] + tail 0.5;
    # KL(s||q) = 0.5 ln 2 + 0.25 ln 1 + 0.25 ln 0.5 = 0.346574 - 0.173287 = 0.173287
    loss = sdpo_logit_loss(torch.tensor([ln(0.5), ln(0.25)]), torch.tensor([ln(0.25), ln(0.25)]), 1.0)
    assert loss.item() == pytest.approx(0.173287, abs=1e-5)
    # no tail: renormalize student [0.4, 0.1] -> [0.8, 0.2], teacher [0.3, 0.3] -> [0.5, 0.5];
    # KL(q||s) = 0.5 ln(0.625) + 0.5 ln(2.5) = -0.235002 + 0.458145 = 0.223144
    loss = sdpo_logit_loss(torch.tensor([ln(0.4), ln(0.1)]), torch.tensor([ln(0.3), ln(0.3)]), 0.0, add_tail=False)
    assert loss.item() == pytest.approx(0.223144, abs=1e-5)


def _divergence(p: torch.Tensor, q: torch.Tensor, alpha: float) -> torch.Tensor:
    """Brute force in probability space: p = student, q = teacher distributions over the last dim."""

    def kl(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a * (a / b).log()).sum(-1)

    if alpha == 0.0:
        return kl(q, p)
    if alpha == 1.0:
        return kl(p, q)
    m = (1 - alpha) * p + alpha * q
    return (1 - alpha) * kl(p, m) + alpha * kl(q, m)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 1.0])
def test_logit_loss_full_vocab_equals_exact_divergence(alpha):
    torch.manual_seed(1)
    student_logits = torch.randn(3, 5, 7, dtype=torch.float64)
    teacher_logits = torch.randn(3, 5, 7, dtype=torch.float64)
    s_logp, ids = topk_log_probs(student_logits, k=7)
    t_logp, _ = topk_log_probs(teacher_logits, ids=ids)
    loss = sdpo_logit_loss(s_logp, t_logp, alpha, add_tail=False)
    exact = _divergence(student_logits.softmax(-1), teacher_logits.softmax(-1), alpha)
    assert loss.shape == (3, 5)
    assert torch.allclose(loss.double(), exact, atol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_logit_loss_topk_with_tail_equals_merged_bucket_divergence(alpha):
    torch.manual_seed(2)
    student_logits = torch.randn(4, 9, dtype=torch.float64)
    teacher_logits = torch.randn(4, 9, dtype=torch.float64)
    k = 3
    s_logp, ids = topk_log_probs(student_logits, k=k)
    t_logp, _ = topk_log_probs(teacher_logits, ids=ids)
    loss = sdpo_logit_loss(s_logp, t_logp, alpha)
    # the merged (k+1)-bucket distributions: the k chosen ids, then the rest summed into one bucket
    p, q = student_logits.softmax(-1), teacher_logits.softmax(-1)
    rest = torch.ones_like(p, dtype=torch.bool).scatter(-1, ids, False)
    merged_p = torch.cat([p.gather(-1, ids), (p * rest).sum(-1, keepdim=True)], -1)
    merged_q = torch.cat([q.gather(-1, ids), (q * rest).sum(-1, keepdim=True)], -1)
    assert torch.allclose(loss.double(), _divergence(merged_p, merged_q, alpha), atol=1e-5)


def test_logit_loss_teacher_is_constant_and_student_gets_gradient():
    torch.manual_seed(3)
    student_logits = torch.randn(2, 6, requires_grad=True)
    teacher_logits = torch.randn(2, 6, requires_grad=True)
    s_logp, ids = topk_log_probs(student_logits, k=3)
    t_logp, _ = topk_log_probs(teacher_logits, ids=ids)
    sdpo_logit_loss(s_logp, t_logp, 0.5).sum().backward()
    assert teacher_logits.grad is None
    assert student_logits.grad is not None and student_logits.grad.abs().sum() > 0


def test_logit_loss_rejects_bad_alpha():
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        sdpo_logit_loss(torch.zeros(2), torch.zeros(2), 1.5)
    with pytest.raises(ValueError):
        sdpo_logit_loss(torch.zeros(2), torch.zeros(2), -0.1)


logits_rows = st.lists(st.floats(-8, 8, allow_nan=False, allow_infinity=False), min_size=6, max_size=6)


@settings(deadline=None, max_examples=80)
@given(
    student=logits_rows,
    teacher=logits_rows,
    alpha=st.floats(0.0, 1.0),
    k=st.integers(1, 6),
    add_tail=st.booleans(),
)
def test_logit_loss_non_negative_and_zero_on_self(student, teacher, alpha, k, add_tail):
    s_logp, ids = topk_log_probs(torch.tensor(student), k=k)
    t_logp, _ = topk_log_probs(torch.tensor(teacher), ids=ids)
    assert sdpo_logit_loss(s_logp, t_logp, alpha, add_tail).item() >= -1e-6
    assert abs(sdpo_logit_loss(s_logp, s_logp.clone(), alpha, add_tail).item()) <= 1e-6


def test_sdpo_grpo_mix():
    grpo = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
    sdpo = torch.tensor([[3.0, 3.0], [0.4, -0.2]])
    # the paper's Eq. 3 on every row: 0.9 x GRPO + 0.1 x SDPO
    assert close(sdpo_grpo_advantages(grpo, sdpo, 0.9), [[1.2, 1.2], [-0.86, -0.92]])
    assert close(sdpo_grpo_advantages(grpo, sdpo, 1.0), grpo.tolist())  # lambda 1: GRPO
    assert close(sdpo_grpo_advantages(grpo, sdpo, 0.0), sdpo.tolist())  # lambda 0: SDPO's token advantage
    with pytest.raises(ValueError, match="grpo_lambda must lie in"):
        sdpo_grpo_advantages(grpo, sdpo, 1.5)


def test_demo_sources():
    groups = ["a", "a", "a", "b", "b", "c"]
    success = [False, True, True, False, False, True]
    # a: rows 1, 2 succeeded; row 1 may not use itself -> row 2. b: none. c: its only success is itself.
    assert demo_sources(groups, success) == [1, 2, 1, None, None, None]
    assert demo_sources(groups, success, dont_reprompt_on_self_success=False) == [1, 1, 1, None, None, 5]
    with pytest.raises(ValueError):
        demo_sources(["a"], [True, False])


def test_reprompt_mask():
    demo = [1, None, None, None]
    assert reprompt_mask(demo, [False, True, False, False], [False, False, True, False]) == [True, True, True, False]
    assert reprompt_mask([None, None], ["", "checker: cell A1 is empty"], [False, False]) == [False, True]
    with pytest.raises(ValueError, match="lengths differ"):
        reprompt_mask([None], [False, False], [False])
