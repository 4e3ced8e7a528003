"""Group-relative normalization of per-sample scores (the GRPO advantage)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

TIE_TOLERANCE = 1e-6  # scores this close, relative to max(1, |score|), are one score: GRPO's own epsilon


def is_uniform(values: Sequence[float], tolerance: float = TIE_TOLERANCE) -> bool:
    """Whether a group's scores are all the same up to float rounding (such a group carries no outcome signal)."""
    return max(values) - min(values) <= tolerance * max(1.0, max(abs(v) for v in values))


def _group_rows(groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """Map each group id to its row indices, groups in first-appearance order."""
    rows: dict[Hashable, list[int]] = {}
    for i, group in enumerate(groups):
        rows.setdefault(group, []).append(i)
    return rows


def group_normalize(
    scores: torch.Tensor, groups: Sequence[Hashable], norm_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Per-group (x - mean) / (std + eps) of a [N] score tensor (unbiased std, in float64); a singleton group or a
    uniformly scored one (`is_uniform`) gives exactly 0."""
    if scores.dim() != 1 or scores.shape[0] != len(groups):
        raise ValueError(f"scores must be [N] with one group id per row, got {tuple(scores.shape)} and {len(groups)}")
    values = scores.detach().double()
    out = torch.zeros_like(values)
    for rows in _group_rows(groups).values():
        index = torch.tensor(rows, device=values.device)
        group = values[index]
        if len(rows) < 2 or is_uniform(group.tolist()):
            continue
        centered = group - group.mean()
        out[index] = centered / (group.std() + eps) if norm_by_std else centered
    return out.to(scores.dtype if scores.is_floating_point() else torch.float32)
