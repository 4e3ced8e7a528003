"""GiGPO's advantages on a padded batch: each row's step anchors, token steps and per-step rewards gathered from the
agent loop's fields, then the registered `gigpo` estimator; `apply` is the `gigpo` step hook."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from verl_cua.algos.gigpo import step_rewards_with_penalties
from verl_cua.integrations.verl.estimator_plan import AdvantageStep
from verl_cua.integrations.verl.gigpo.estimator import turn_steps

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import GigpoConfig


def gigpo_token_advantages(
    data: DataProto, extra: list[dict], sessions: list, gigpo: GigpoConfig, metrics: dict, penalty: float = 0.0
) -> torch.Tensor:
    """GiGPO advantages per token: episode rows take their turn index as the step; step rows their `step_index`.
    Step returns charge each invalid action's `penalty` at its own step (the episode level sees the whole reward)."""
    mask = data.batch["response_mask"]
    uids = [str(u) for u in data.non_tensor_batch["uid"]]
    if any("step_index" in e for e in extra):
        index = torch.tensor([int(e.get("step_index", 0)) for e in extra]).unsqueeze(-1)
        steps = torch.where(mask.bool(), index.expand_as(mask), torch.full_like(mask, -1, dtype=torch.long))
    else:
        steps = turn_steps(mask)
    anchors = [list(e.get("cua_anchors") or []) for e in extra]
    step_rewards = [
        step_rewards_with_penalties(_task_score(e), e["cua_invalid_steps"], penalty, steps=len(a))
        if "cua_invalid_steps" in e
        else None
        for e, a in zip(extra, anchors, strict=True)
    ]
    advantages, _ = get_adv_estimator_fn("gigpo")(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=mask.float(),
        index=np.array(uids, dtype=object),
        step_anchors=anchors,
        token_steps=steps,
        episodes=[(u, s) for u, s in zip(uids, sessions, strict=True)],
        step_rewards=step_rewards if all(r is not None for r in step_rewards) else None,
        gamma=gigpo.gamma,
        step_weight=gigpo.step_weight,
        norm=gigpo.norm,
        metrics=metrics,
    )
    return advantages


def apply(data: DataProto, step: AdvantageStep) -> dict[str, float]:
    """The `gigpo` step hook: GiGPO's advantages (episode and step groups) in place of GRPO's; `gigpo/*` metrics."""
    metrics: dict[str, float] = {}
    fields, cua = step.fields, step.cua
    advantages = gigpo_token_advantages(
        data, fields.extra, fields.sessions, cua.gigpo, metrics, cua.action.invalid_penalty
    )
    data.batch["advantages"], data.batch["returns"] = advantages, advantages.clone()
    return metrics


def _task_score(extra: Mapping[str, Any]) -> float:
    """The task score in [0, 1] the agent loop rewards (0 for an infra failure)."""
    return 0.0 if extra.get("cua_infra_failure") else max(0.0, min(1.0, float(extra.get("cua_score", 0.0))))
