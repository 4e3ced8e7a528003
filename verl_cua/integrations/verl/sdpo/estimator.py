"""`algorithm.adv_estimator=sdpo`: the token-level self-distillation signal as the advantage."""

from __future__ import annotations

import torch
from verl.trainer.ppo.core_algos import register_adv_est

from verl_cua.algos.sdpo import sdpo_token_advantages

NEEDS_TRAINER = "needs the teacher pass of verl-cua's trainer; train with `python -m verl_cua.main`"


@register_adv_est("sdpo")
def compute_sdpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index=None,
    config=None,
    teacher_log_probs: torch.Tensor | None = None,
    old_log_probs: torch.Tensor | None = None,
    reprompt: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A_t = log pi_teacher(y_t) - log pi_student(y_t) on model tokens of reprompted rows, 0 elsewhere."""
    if teacher_log_probs is None or old_log_probs is None or reprompt is None:
        raise ValueError(f"adv_estimator=sdpo {NEEDS_TRAINER}")
    advantages = sdpo_token_advantages(teacher_log_probs, old_log_probs, response_mask, reprompt)
    return advantages, advantages
