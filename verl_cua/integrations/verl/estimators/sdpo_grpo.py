"""`algorithm.adv_estimator=sdpo_grpo`: successes keep GRPO's outcome advantage, failures take the SDPO signal."""

from __future__ import annotations

import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, register_adv_est

from verl_cua.algos.sdpo import sdpo_grpo_advantages, sdpo_token_advantages
from verl_cua.integrations.verl.estimators.sdpo import NEEDS_TRAINER


@register_adv_est("sdpo_grpo")
def compute_sdpo_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index=None,
    config=None,
    teacher_log_probs: torch.Tensor | None = None,
    old_log_probs: torch.Tensor | None = None,
    reprompt: torch.Tensor | None = None,
    success: torch.Tensor | None = None,
    hybrid_weight: float = 1.0,
    grpo_advantages: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row routing: A = A_GRPO on successful rows, hybrid_weight x the token-level A_SDPO on failed ones (not
    SRPO, which gives failures logit-level SDPO with entropy-aware weights; docs/algorithms.md)."""
    if teacher_log_probs is None or old_log_probs is None or reprompt is None or success is None:
        raise ValueError(f"adv_estimator=sdpo_grpo {NEEDS_TRAINER}")
    if grpo_advantages is None:
        norm = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
        grpo_advantages, _ = compute_grpo_outcome_advantage(
            token_level_rewards, response_mask, index, norm_adv_by_std_in_grpo=norm, config=config
        )
    sdpo = sdpo_token_advantages(teacher_log_probs, old_log_probs, response_mask, reprompt)
    advantages = sdpo_grpo_advantages(grpo_advantages, sdpo, success, hybrid_weight) * response_mask
    return advantages, advantages
