"""The SDPO EMA teacher's arithmetic on one rank's parameter shards, in fp32 on the host: copy, average, distance.

Every read of the live parameters waits for the accelerator first (`settle`): verl offloads parameters to the host
with `non_blocking=True` copies (`PARAM_OFFLOAD=true`) and leaves the wait to whoever reads them, so an EMA taken
right after an update would otherwise average buffers the copy has not filled yet."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def settle() -> None:
    """Wait until every copy queued on the accelerator has landed (nothing to do without one)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and accelerator.is_available():
        accelerator.synchronize()
    elif torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def ema_copy(params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The parameters as a new fp32 host copy (the teacher's first state)."""
    settle()
    return [p.detach().to("cpu", torch.float32, copy=True) for p in params]


def ema_update(ema: Sequence[torch.Tensor], params: Sequence[torch.Tensor], rate: float) -> None:
    """theta_T <- (1 - rate) theta_T + rate theta, in place."""
    settle()
    with torch.no_grad():
        for shadow, p in zip(ema, params, strict=True):
            shadow.mul_(1.0 - rate).add_(p.detach().to("cpu", torch.float32), alpha=rate)


def ema_swap_in(ema: Sequence[torch.Tensor], params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Write the teacher's weights into the parameters; the parameters' own values, as a host backup."""
    settle()
    with torch.no_grad():
        backup = [p.detach().to("cpu", copy=True) for p in params]
        for p, shadow in zip(params, ema, strict=True):
            p.copy_(shadow.to(p.device, p.dtype))
    return backup


def ema_restore(params: Sequence[torch.Tensor], backup: Sequence[torch.Tensor]) -> None:
    """Write a backup taken by `ema_swap_in` back into the parameters."""
    settle()
    with torch.no_grad():
        for p, saved in zip(params, backup, strict=True):
            p.copy_(saved.to(p.device, p.dtype))


def ema_distance(ema: Sequence[torch.Tensor], params: Sequence[torch.Tensor]) -> tuple[float, float]:
    """The squared L2 distance between teacher and parameters, and the parameters' squared norm."""
    settle()
    gap = norm = 0.0
    with torch.no_grad():
        for shadow, p in zip(ema, params, strict=True):
            live = p.detach().to("cpu", torch.float32)
            gap += float((shadow - live).pow(2).sum())
            norm += float(live.pow(2).sum())
    return gap, norm
