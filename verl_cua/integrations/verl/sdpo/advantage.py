"""SDPO's advantages on a padded batch: the teacher's log-probs against the student's, through the registered
`sdpo` / `sdpo_grpo` estimator, and the `sdpo/*` metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from verl_cua.integrations.verl.estimator_plan import EstimatorPlan
from verl_cua.integrations.verl.sdpo.teacher_pass import TeacherResult


def teacher_tensor(old_log_probs: torch.Tensor, teacher: TeacherResult) -> torch.Tensor:
    """[B, L] teacher log-probs: the teacher's on reprompted rows, the student's own elsewhere (A = 0 there)."""
    out = old_log_probs.detach().clone().float()
    for row, values in teacher.teacher_log_probs.items():
        n = min(values.shape[0], out.shape[1])
        out[row, :n] = values[:n].to(out.dtype)
    return out


def sdpo_advantages(
    plan: EstimatorPlan, data: DataProto, teacher: TeacherResult, sdpo: Mapping[str, Any], grpo: torch.Tensor | None
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
    if plan.grpo_mix:
        kwargs.update(grpo_lambda=float(sdpo.get("grpo_lambda", 0.9)), grpo_advantages=grpo)
    advantages, _ = get_adv_estimator_fn(plan.estimator)(**kwargs)
    on = mask.bool() & reprompt.unsqueeze(-1)
    off = mask.bool() & ~reprompt.unsqueeze(-1)
    diff = (teacher_lp - old)[on]
    metrics = {
        "sdpo/adv_mean": float(advantages[mask.bool()].mean()) if mask.any() else 0.0,
        "sdpo/teacher_minus_student": float(diff.mean()) if diff.numel() else 0.0,
        "sdpo/teacher_minus_student_abs": float(diff.abs().mean()) if diff.numel() else 0.0,
        "sdpo/reprompted_tokens": float(on.sum()),
    }
    if plan.reprompted_only:
        metrics["sdpo/not_reprompted_rows"] = float((~reprompt).sum())
        metrics["sdpo/not_reprompted_adv_abs_max"] = float(advantages[off].abs().max()) if off.any() else 0.0
    return advantages, metrics
