"""verl-cua's estimators on a padded batch: SDPO (teacher log-probs), the SDPO+GRPO hybrid, GiGPO (step anchors)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from verl_cua.algos.gigpo import step_rewards_with_penalties
from verl_cua.integrations.verl.estimators.gigpo import turn_steps
from verl_cua.integrations.verl.sdpo.teacher_pass import TeacherResult


def teacher_tensor(old_log_probs: torch.Tensor, teacher: TeacherResult) -> torch.Tensor:
    """[B, L] teacher log-probs: the teacher's on reprompted rows, the student's own elsewhere (A = 0 there)."""
    out = old_log_probs.detach().clone().float()
    for row, values in teacher.teacher_log_probs.items():
        n = min(values.shape[0], out.shape[1])
        out[row, :n] = values[:n].to(out.dtype)
    return out


def sdpo_advantages(
    estimator: str, data: DataProto, teacher: TeacherResult, sdpo: Mapping[str, Any], grpo: torch.Tensor | None
) -> tuple[torch.Tensor, dict[str, float]]:
    """Advantages of `sdpo` / `sdpo_grpo` and the SDPO metrics (over reprompted rows' model tokens)."""
    batch = data.batch
    mask = batch["response_mask"].float()
    old = batch["old_log_probs"].float()
    teacher_lp = teacher_tensor(old, teacher)
    reprompt = torch.tensor(teacher.reprompt, dtype=torch.bool)
    kwargs = {
        "token_level_rewards": batch["token_level_rewards"],
        "response_mask": mask,
        "index": data.non_tensor_batch["uid"],
        "teacher_log_probs": teacher_lp,
        "old_log_probs": old,
        "reprompt": reprompt,
    }
    if estimator == "sdpo_grpo":
        kwargs.update(grpo_lambda=float(sdpo.get("grpo_lambda", 0.9)), grpo_advantages=grpo)
    advantages, _ = get_adv_estimator_fn(estimator)(**kwargs)
    on = mask.bool() & reprompt.unsqueeze(-1)
    off = mask.bool() & ~reprompt.unsqueeze(-1)
    diff = (teacher_lp - old)[on]
    metrics = {
        "sdpo/adv_mean": float(advantages[mask.bool()].mean()) if mask.any() else 0.0,
        "sdpo/teacher_minus_student": float(diff.mean()) if diff.numel() else 0.0,
        "sdpo/teacher_minus_student_abs": float(diff.abs().mean()) if diff.numel() else 0.0,
        "sdpo/reprompted_tokens": float(on.sum()),
    }
    if estimator == "sdpo":
        metrics["sdpo/not_reprompted_rows"] = float((~reprompt).sum())
        metrics["sdpo/not_reprompted_adv_abs_max"] = float(advantages[off].abs().max()) if off.any() else 0.0
    return advantages, metrics


def gigpo_token_advantages(
    data: DataProto, extra: list[dict], sessions: list, gigpo: Mapping[str, Any], metrics: dict, penalty: float = 0.0
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
        gamma=float(gigpo.get("gamma", 0.95)),
        step_weight=float(gigpo.get("step_weight", 1.0)),
        norm=str(gigpo.get("norm", "mean")),
        metrics=metrics,
    )
    return advantages


def _task_score(extra: Mapping[str, Any]) -> float:
    """The task score in [0, 1] the agent loop rewards (0 for an infra failure)."""
    return 0.0 if extra.get("cua_infra_failure") else max(0.0, min(1.0, float(extra.get("cua_score", 0.0))))
