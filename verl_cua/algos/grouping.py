"""Group-relative normalization of per-sample scores (the GRPO advantage)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch


def _group_rows(groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """Map each group id to its row indices, groups in first-appearance order."""
    rows: dict[Hashable, list[int]] = {}
    for i, group in enumerate(groups):
        rows.setdefault(group, []).append(i)
    return rows


def group_normalize(
    scores: torch.Tensor, groups: Sequence[Hashable], norm_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Per-group (x - mean) / (std + eps) of a [N] score tensor (unbiased std); a singleton group gives 0."""
    if scores.dim() != 1 or scores.shape[0] != len(groups):
        raise ValueError(f"scores must be [N] with one group id per row, got {tuple(scores.shape)} and {len(groups)}")
    values = scores.detach() if scores.is_floating_point() else scores.float()
    out = torch.zeros_like(values)
    for rows in _group_rows(groups).values():
        if len(rows) < 2:
            continue
        index = torch.tensor(rows, device=values.device)
        group = values[index]
        centered = group - group.mean()
        out[index] = centered / (group.std() + eps) if norm_by_std else centered
    return out
