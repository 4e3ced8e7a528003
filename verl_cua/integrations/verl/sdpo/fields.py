"""The per-row fields the SDPO actor loss reads in the update: which model tokens the SDPO term trains, the
teacher's top-k log-probs for the logit loss, and the `loss_mask` verl counts to normalise the loss."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from verl_cua.integrations.verl.estimator_plan import EstimatorPlan
from verl_cua.integrations.verl.sdpo import logit
from verl_cua.integrations.verl.sdpo.loss import MASK
from verl_cua.integrations.verl.sdpo.teacher_pass import TeacherResult


def sdpo_loss_fields(
    plan: EstimatorPlan, teacher: TeacherResult, response_mask, infra: Sequence[bool], sdpo: Mapping[str, Any]
) -> list[dict[str, torch.Tensor]]:
    """Per row: MASK (model tokens the SDPO term trains), and for the logit loss IDS/TEACHER ([response_len, k],
    zeros on rows that were not reprompted); with `normalize=reprompted` (plain SDPO, `plan.reprompted_only`)
    `loss_mask` = MASK, so verl's token count, and with it the loss's mean, runs over the reprompted tokens only."""
    topk = int(sdpo.get("topk", 100)) if sdpo.get("loss") == "logit" else 0  # the plan's loss (estimator_plan)
    reprompted_only = plan.reprompted_only and sdpo.get("normalize", "reprompted") == "reprompted"
    rows = []
    for i, mask in enumerate(response_mask.unbind(0)):
        trains = not infra[i] and (teacher.reprompt[i] if plan.reprompted_only else True)
        sd_mask = mask.clone() if trains else torch.zeros_like(mask)
        row = {MASK: sd_mask}
        if reprompted_only:
            row["loss_mask"] = sd_mask.clone()
        if topk:
            n = mask.shape[0]
            row[logit.IDS] = _rows(teacher.topk_ids.get(i), n, topk)
            row[logit.TEACHER] = _rows(teacher.teacher_topk.get(i), n, topk)
        rows.append(row)
    return rows


def _rows(value: torch.Tensor | None, n: int, topk: int) -> torch.Tensor:
    """A [n, k] float32 tensor: value (cut or zero-padded to n rows) or zeros."""
    out = torch.zeros(n, topk, dtype=torch.float32)
    if value is not None:
        m = min(n, value.shape[0])
        out[:m] = value[:m].float()
    return out


def put_row_fields(keys: Sequence[str], partition_id: str, rows: Sequence[dict[str, torch.Tensor]]) -> None:
    """Write per-row fields onto existing TransferQueue rows, one call per set of field shapes."""
    # stacked as plain tensors: TransferQueue splits those on the batch dimension (no jagged split)
    import transfer_queue as tq
    from tensordict import TensorDict

    groups: dict[tuple, list[tuple[str, dict[str, torch.Tensor]]]] = defaultdict(list)
    for key, row in zip(keys, rows, strict=True):
        groups[tuple((name, tuple(value.shape)) for name, value in sorted(row.items()))].append((key, row))
    for members in groups.values():
        names = list(members[0][1])
        stacked = {name: torch.stack([row[name] for _, row in members]) for name in names}
        fields = TensorDict(stacked, batch_size=len(members))
        tq.kv_batch_put(keys=[key for key, _ in members], partition_id=partition_id, fields=fields)
