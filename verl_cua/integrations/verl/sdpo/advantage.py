"""SDPO's advantages on a padded batch: the teacher's log-probs against the student's, through the registered
`sdpo` / `sdpo_grpo` estimator, and the `sdpo/*` metrics; `apply`, the `sdpo` step hook, also writes the loss's
per-row fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from verl_cua.integrations.verl.estimator_plan import AdvantageStep, EstimatorPlan
from verl_cua.integrations.verl.rows.fields import put_row_fields
from verl_cua.integrations.verl.sdpo import IDS, TEACHER
from verl_cua.integrations.verl.sdpo.fields import sdpo_loss_fields
from verl_cua.integrations.verl.sdpo.teacher_pass import TeacherResult

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import SdpoConfig


def teacher_tensor(old_log_probs: torch.Tensor, teacher: TeacherResult) -> torch.Tensor:
    """[B, L] teacher log-probs: the teacher's on reprompted rows, the student's own elsewhere (A = 0 there)."""
    out = old_log_probs.detach().clone().float()
    for row, values in teacher.teacher_log_probs.items():
        n = min(values.shape[0], out.shape[1])
        out[row, :n] = values[:n].to(out.dtype)
    return out


def sdpo_advantages(
    plan: EstimatorPlan, data: DataProto, teacher: TeacherResult, sdpo: SdpoConfig, grpo: torch.Tensor | None
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
        kwargs.update(grpo_lambda=sdpo.grpo_lambda, grpo_advantages=grpo)
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


def apply(data: DataProto, step: AdvantageStep) -> dict[str, float]:
    """The `sdpo` step hook: SDPO's (or the GRPO mix's) advantages in place of GRPO's, from the teacher pass's
    result, and the actor loss's per-row fields onto the batch's rows; the `sdpo/*` metrics."""
    plan, sdpo, teacher = step.plan, step.cua.sdpo, step.teacher
    advantages, metrics = sdpo_advantages(plan, data, teacher, sdpo, data.batch["advantages"])
    data.batch["advantages"], data.batch["returns"] = advantages, advantages.clone()
    rows = sdpo_loss_fields(plan, teacher, step.fields.response_mask, step.excluded, sdpo)
    put_row_fields(step.batch.keys, step.batch.partition_id, rows)
    if plan.logit_loss:  # the host memory the logit loss adds: k ids + k teacher log-probs per response token
        metrics["sdpo/topk_fields_mb"] = sum(r[k].numel() * 4 for r in rows for k in (IDS, TEACHER)) / 2**20
    return metrics
