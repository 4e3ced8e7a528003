"""SDPO (self-distillation): token advantages, IS-weighted loss, top-k logit divergences, reprompt planning."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import torch

_LOG_RATIO_BOUND = 20.0
_TAIL_LSE_MAX = -1e-7


def sdpo_token_advantages(
    teacher_log_probs: torch.Tensor,
    student_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    reprompt_mask: torch.Tensor,
) -> torch.Tensor:
    """[B,L] detached A_t = log q - log p on response tokens of reprompted rows ([B] bool), 0 elsewhere."""
    keep = response_mask.bool() & reprompt_mask.bool().unsqueeze(-1)
    diff = (teacher_log_probs - student_log_probs).detach()
    return torch.where(keep, diff, torch.zeros_like(diff))


def truncated_is_weight(log_prob: torch.Tensor, old_log_prob: torch.Tensor, is_clip: float | None) -> torch.Tensor:
    """Detached truncated importance weight exp(clamp(log_prob - old, -20, 20)) capped at is_clip; ones when None."""
    if is_clip is None:
        return torch.ones_like(log_prob).detach()
    log_ratio = (log_prob - old_log_prob).detach().clamp(-_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)
    return log_ratio.exp().clamp(max=is_clip)


def sdpo_policy_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    is_clip: float | None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token -w*A*log_prob masked by response_mask (w: truncated IS x rollout IS weights), with IS metrics."""
    mask = response_mask.bool()
    weight = truncated_is_weight(log_prob, old_log_prob, is_clip)
    if rollout_is_weights is not None:
        weight = weight * rollout_is_weights.detach()
    loss = -weight * advantages.detach() * log_prob
    loss = torch.where(mask, loss, torch.zeros_like(loss))
    n_tokens = max(int(mask.sum().item()), 1)
    with torch.no_grad():
        weight_mean = (weight * mask).sum().item() / n_tokens
        clip_frac = 0.0
        if is_clip is not None:
            log_ratio = (log_prob - old_log_prob).clamp(-_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)
            clip_frac = ((log_ratio.exp() > is_clip) & mask).sum().item() / n_tokens
    return loss, {"sdpo/is_weight_mean": float(weight_mean), "sdpo/is_clip_frac": float(clip_frac)}


def topk_log_probs(
    logits: torch.Tensor, k: int | None = None, ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of logits [..., V] at ids (the top-k ids when ids is None), without a full log_softmax tensor."""
    if ids is None:
        if k is None or k < 1:
            raise ValueError(f"pass ids, or k >= 1 to take the top-k ids, got k={k!r}")
        ids = logits.topk(k, dim=-1).indices
    log_norm = torch.logsumexp(logits, dim=-1, keepdim=True)
    return logits.gather(-1, ids) - log_norm, ids


def _buckets(topk_logp: torch.Tensor, add_tail: bool) -> torch.Tensor:
    """The (k+1)-bucket log-distribution (top-k + tail mass) or the renormalized top-k."""
    log_mass = torch.logsumexp(topk_logp, dim=-1, keepdim=True)
    if not add_tail:
        return topk_logp - log_mass
    tail = torch.log(-torch.expm1(log_mass.clamp(max=_TAIL_LSE_MAX)))
    return torch.cat([topk_logp, tail], dim=-1)


def _kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last dim, both given as log-probabilities."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def sdpo_logit_loss(
    student_topk_logp: torch.Tensor, teacher_topk_logp: torch.Tensor, alpha: float, add_tail: bool = True
) -> torch.Tensor:
    """Per-token generalized JSD over the top-k (+tail) buckets: 0 = KL(teacher||student), 1 = KL(student||teacher)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    student = _buckets(student_topk_logp.float(), add_tail)
    teacher = _buckets(teacher_topk_logp.detach().float(), add_tail)
    if alpha == 0.0:
        return _kl(teacher, student)
    if alpha == 1.0:
        return _kl(student, teacher)
    mixture = torch.logsumexp(torch.stack([student + math.log(1.0 - alpha), teacher + math.log(alpha)]), dim=0)
    return (1.0 - alpha) * _kl(student, mixture) + alpha * _kl(teacher, mixture)


def sdpo_grpo_advantages(
    grpo_advantages: torch.Tensor, sdpo_advantages: torch.Tensor, grpo_lambda: float
) -> torch.Tensor:
    """[B,L] the SDPO paper's mix for weak models (§4.5): A = lambda * A_GRPO + (1 - lambda) * A_SDPO, on every row
    (A_SDPO is 0 where the teacher saw nothing new)."""
    if not 0.0 <= grpo_lambda <= 1.0:
        raise ValueError(f"grpo_lambda must lie in [0, 1], got {grpo_lambda}")
    return grpo_lambda * grpo_advantages + (1.0 - grpo_lambda) * sdpo_advantages


def demo_sources(
    groups: Sequence[Hashable], success: Sequence[bool], dont_reprompt_on_self_success: bool = True
) -> list[int | None]:
    """For each row, the first successful row of its group (another row when dont_reprompt_on_self_success), or None."""
    if len(groups) != len(success):
        raise ValueError(f"groups and success differ in length: {len(groups)} != {len(success)}")
    successes: dict[Hashable, list[int]] = {}
    for i, (group, ok) in enumerate(zip(groups, success, strict=True)):
        if ok:
            successes.setdefault(group, []).append(i)
    demos: list[int | None] = []
    for i, group in enumerate(groups):
        pool = successes.get(group, [])
        if dont_reprompt_on_self_success:
            pool = [j for j in pool[:2] if j != i]
        demos.append(pool[0] if pool else None)
    return demos


def reprompt_mask(demo: list[int | None], has_feedback: Sequence[bool], has_image: Sequence[bool]) -> list[bool]:
    """True where the teacher context gets something new: a demo, non-empty feedback or a final screenshot."""
    if not len(demo) == len(has_feedback) == len(has_image):
        lengths = f"demo {len(demo)}, has_feedback {len(has_feedback)}, has_image {len(has_image)}"
        raise ValueError(f"lengths differ: {lengths}")
    return [d is not None or bool(f) or bool(img) for d, f, img in zip(demo, has_feedback, has_image, strict=True)]
