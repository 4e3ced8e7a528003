"""CoSo's per-row loss field: the agent loop's per-token causal weights (`cua_coso_weights`, aligned with the row's
response mask) as the tensor `WEIGHT` the actor loss reads, and the step's driver-side CoSo metrics; `apply` is the
`coso` step hook."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from verl_cua.integrations.verl.coso import WEIGHT
from verl_cua.integrations.verl.estimator_plan import AdvantageStep
from verl_cua.integrations.verl.rows.fields import put_row_fields


def coso_weight_rows(
    extra: Sequence[dict], response_mask, excluded: Sequence[bool]
) -> tuple[list[dict[str, torch.Tensor]], dict[str, float]]:
    """Per row {WEIGHT: float32 like its response mask}: the row's weights on its model tokens, 0 on observation
    tokens, padding and rows that train on nothing (`excluded`: infra failures, lone groups; a row without weights,
    such as an infra row, gets 0). Metrics over the model tokens of the rows that train: `coso/weight_mean`,
    `coso/causal_fraction_rows` (B > 0), `coso/weight_s` (the agent loops' seconds computing the weights, summed over
    the batch's rows) and `coso/weight_ms_per_token`."""
    rows, total, causal, tokens, seconds = [], 0.0, 0, 0, 0.0
    for i, mask in enumerate(response_mask.unbind(0)):
        row = torch.zeros(mask.shape, dtype=torch.float32)
        weights = extra[i].get("cua_coso_weights") if i < len(extra) else None
        seconds += float(extra[i].get("cua_coso_seconds") or 0.0) if i < len(extra) else 0.0
        if weights is not None and not excluded[i]:
            n = min(len(weights), row.shape[0])
            row[:n] = torch.as_tensor(list(weights)[:n], dtype=torch.float32)
            model = mask.bool()
            row = torch.where(model, row, torch.zeros_like(row))
            total += float(row[model].sum())
            causal += int((row[model] > 0).sum())
            tokens += int(model.sum())
        rows.append({WEIGHT: row})
    n_tok = max(1, tokens)
    metrics = {
        "coso/weight_mean_rows": total / n_tok,
        "coso/causal_fraction_rows": causal / n_tok,
        "coso/weight_s": seconds,
        "coso/weight_ms_per_token": 1000.0 * seconds / n_tok,
    }
    return rows, metrics


def apply(data: Any, step: AdvantageStep) -> dict[str, float]:
    """The `coso` step hook: the weights of the rows that train onto the batch's rows for the actor loss (the
    advantages stay the estimator's); the driver-side `coso/*` metrics."""
    rows, metrics = coso_weight_rows(step.fields.extra, step.fields.response_mask, step.excluded)
    put_row_fields(step.batch.keys, step.batch.partition_id, rows)
    return metrics
