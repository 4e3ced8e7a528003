"""`actor.policy_loss.loss_mode=sdpo`: -w * A * log pi with a detached importance weight truncated at `is_clip`.

For verl's own `ppo_loss` (`IS_CLIP` is the module's truncation); verl-cua's trainer ships its SDPO loss, token- or
logit-level, through `cua_actor_loss` (`verl_cua.integrations.verl.actor_loss`, then `sdpo.loss`)."""

from __future__ import annotations

import torch
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss

from verl_cua.algos.sdpo import sdpo_policy_loss

IS_CLIP: float | None = 2.0


@register_policy_loss("sdpo")
def compute_sdpo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config=None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The SDPO token-level loss, aggregated like verl's policy losses (global batch info from the actor config)."""
    per_token, metrics = sdpo_policy_loss(
        log_prob, old_log_prob, advantages, response_mask, IS_CLIP, rollout_is_weights=rollout_is_weights
    )
    batch_info = dict(getattr(config, "global_batch_info", None) or {}) if config is not None else {}
    loss = agg_loss(loss_mat=per_token, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **batch_info)
    return loss, metrics
