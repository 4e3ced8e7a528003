"""`algorithm.adv_estimator=gigpo`: episode-level group advantage plus step-level groups of identical screens."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from verl.trainer.ppo.core_algos import register_adv_est

from verl_cua.algos.gigpo import gigpo_advantages

NEEDS_ANCHORS = "adv_estimator=gigpo needs the step anchors of the gui_agent loop; train with `python -m verl_cua.main`"


@register_adv_est("gigpo")
def compute_gigpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index=None,
    config=None,
    step_anchors: Sequence[Sequence[Hashable]] | None = None,
    token_steps: torch.Tensor | None = None,
    episodes: Sequence[Hashable] | None = None,
    step_rewards: Sequence[Sequence[float]] | None = None,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    norm: str = "mean",
    metrics: dict | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token: A^E(episode) + step_weight * A^S(step of that token); rows of one episode share its anchors.

    `token_steps[b, t]` is the episode step token t belongs to (-1: not a model token); `episodes[b]` names the
    episode of row b (default: one episode per row); `index[b]` its group (uid); `step_rewards[b]` the rewards of
    row b's episode per step (default: all of the episode's reward at its last step)."""
    if step_anchors is None or token_steps is None or index is None:
        raise ValueError(NEEDS_ANCHORS)
    rows = len(index)
    episodes = list(episodes) if episodes is not None else list(range(rows))
    first: dict[Hashable, int] = {}
    for b, ep in enumerate(episodes):
        first.setdefault(ep, b)
    order = list(first)
    reward = token_level_rewards.sum(-1)
    ep_rewards = [float(reward[first[ep]]) for ep in order]
    ep_groups = [str(index[first[ep]]) for ep in order]
    ep_anchors = [list(step_anchors[first[ep]]) for ep in order]
    ep_steps = None if step_rewards is None else [list(step_rewards[first[ep]]) for ep in order]
    _, per_step, step_metrics = gigpo_advantages(
        ep_rewards, ep_groups, ep_anchors, step_rewards=ep_steps, gamma=gamma, step_weight=step_weight, norm=norm
    )
    position = {ep: k for k, ep in enumerate(order)}
    advantages = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    for b in range(rows):
        steps = per_step[position[episodes[b]]]
        if not steps:
            continue
        table = torch.tensor(steps, dtype=torch.float32)
        idx = token_steps[b].clamp(min=0, max=len(steps) - 1)
        advantages[b] = torch.where(token_steps[b] >= 0, table[idx], torch.zeros_like(table[idx]))
    advantages = advantages * response_mask
    if metrics is not None:
        metrics.update(step_metrics)
    return advantages, advantages


def turn_steps(response_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] step index of each model token in multi-turn episode rows: the k-th run of mask==1 is step k; -1 off."""
    mask = response_mask.bool()
    starts = mask & ~torch.nn.functional.pad(mask[:, :-1], (1, 0), value=False)
    steps = torch.cumsum(starts.long(), dim=-1) - 1
    return torch.where(mask, steps, torch.full_like(steps, -1))
