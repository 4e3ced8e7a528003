"""`algorithm.adv_estimator=sdpo_grpo`: the SDPO paper's mix, lambda x GRPO's outcome advantage + (1 - lambda) x
SDPO's token advantage, on every row."""

from __future__ import annotations

import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, register_adv_est

from verl_cua.algos.sdpo import sdpo_grpo_advantages, sdpo_token_advantages
from verl_cua.integrations.verl.sdpo.estimator import NEEDS_TRAINER


@register_adv_est("sdpo_grpo")
def compute_sdpo_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index=None,
    config=None,
    teacher_log_probs: torch.Tensor | None = None,
    old_log_probs: torch.Tensor | None = None,
    reprompt: torch.Tensor | None = None,
    grpo_lambda: float = 0.9,
    grpo_advantages: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A_t = grpo_lambda x A_GRPO + (1 - grpo_lambda) x A_SDPO,t (token-level, log q - log p on reprompted rows,
    0 elsewhere): Eq. 3 of the SDPO paper, its answer for weaker models (docs/algorithms.md)."""
    if teacher_log_probs is None or old_log_probs is None or reprompt is None:
        raise ValueError(f"adv_estimator=sdpo_grpo {NEEDS_TRAINER}")
    if grpo_advantages is None:
        norm = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
        grpo_advantages, _ = compute_grpo_outcome_advantage(
            token_level_rewards, response_mask, index, norm_adv_by_std_in_grpo=norm, config=config
        )
    sdpo = sdpo_token_advantages(teacher_log_probs, old_log_probs, response_mask, reprompt)
    advantages = sdpo_grpo_advantages(grpo_advantages, sdpo, grpo_lambda) * response_mask
    return advantages, advantages
