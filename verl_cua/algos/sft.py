"""Supervised loss on the model tokens of successful trajectories (the Entropulse SFT phase)."""

from __future__ import annotations

import torch


def sft_loss(log_prob: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Per-token negative log-likelihood -log_prob on masked tokens, zeros elsewhere."""
    mask = response_mask.bool()
    return torch.where(mask, -log_prob, torch.zeros_like(log_prob))
