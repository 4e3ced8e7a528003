"""The per-row fields the SDPO actor loss reads in the update: which model tokens the SDPO term trains, the
teacher's top-k log-probs for the logit loss, and the `loss_mask` verl counts to normalise the loss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from verl_cua.integrations.verl.estimator_plan import EstimatorPlan
from verl_cua.integrations.verl.sdpo import IDS, MASK, TEACHER
from verl_cua.integrations.verl.sdpo.teacher_pass import TeacherResult

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import SdpoConfig


def sdpo_loss_fields(
    plan: EstimatorPlan, teacher: TeacherResult, response_mask, infra: Sequence[bool], sdpo: SdpoConfig
) -> list[dict[str, torch.Tensor]]:
    """Per row: MASK (model tokens the SDPO term trains), and for the logit loss IDS/TEACHER ([response_len, k],
    zeros on rows that were not reprompted); with `normalize=reprompted` (plain SDPO, `plan.reprompted_only`)
    `loss_mask` = MASK, so verl's token count, and with it the loss's mean, runs over the reprompted tokens only."""
    topk = sdpo.topk if plan.logit_loss else 0
    reprompted_only = plan.reprompted_only and sdpo.normalize == "reprompted"
    rows = []
    for i, mask in enumerate(response_mask.unbind(0)):
        trains = not infra[i] and (teacher.reprompt[i] if plan.reprompted_only else True)
        sd_mask = mask.clone() if trains else torch.zeros_like(mask)
        row = {MASK: sd_mask}
        if reprompted_only:
            row["loss_mask"] = sd_mask.clone()
        if topk:
            n = mask.shape[0]
            row[IDS] = _rows(teacher.topk_ids.get(i), n, topk)
            row[TEACHER] = _rows(teacher.teacher_topk.get(i), n, topk)
        rows.append(row)
    return rows


def _rows(value: torch.Tensor | None, n: int, topk: int) -> torch.Tensor:
    """A [n, k] float32 tensor: value (cut or zero-padded to n rows) or zeros."""
    out = torch.zeros(n, topk, dtype=torch.float32)
    if value is not None:
        m = min(n, value.shape[0])
        out[:m] = value[:m].float()
    return out
