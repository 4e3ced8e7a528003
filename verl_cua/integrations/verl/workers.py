"""verl's actor/rollout/ref worker plus the SDPO EMA teacher: an exponential moving average of the actor's weights,
kept on the host next to each rank's own shard, and swapped into the actor for the teacher pass."""

from __future__ import annotations

import torch
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.engine_workers import ActorRolloutRefWorker


def _local(param: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a parameter (FSDP2 DTensor) or the parameter itself."""
    return param.to_local() if hasattr(param, "to_local") else param.data


class CuaActorRolloutRefWorker(ActorRolloutRefWorker):
    """Adds `cua_ema_update`, `cua_ema_swap_in` and `cua_ema_swap_out` (every actor rank, on its own shard)."""

    def _cua_params(self) -> list[torch.Tensor]:
        return [_local(p) for p in self.actor.engine.module.parameters()]

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_update(self, rate: float) -> None:
        """theta_T <- (1 - rate) theta_T + rate theta (the first call copies theta); fp32, on the host."""
        params = self._cua_params()
        ema = getattr(self, "_cua_ema", None)
        if ema is None:
            self._cua_ema = [p.detach().to("cpu", torch.float32, copy=True) for p in params]
            return
        with torch.no_grad():
            for shadow, p in zip(ema, params, strict=True):
                shadow.mul_(1.0 - rate).add_(p.detach().to("cpu", torch.float32), alpha=rate)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_swap_in(self) -> None:
        """Put the EMA weights into the actor (the current ones go to a host backup)."""
        params = self._cua_params()
        with torch.no_grad():
            self._cua_backup = [p.detach().to("cpu", copy=True) for p in params]
            for p, shadow in zip(params, self._cua_ema, strict=True):
                p.copy_(shadow.to(p.device, p.dtype))

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_swap_out(self) -> None:
        """Restore the actor's own weights after the teacher pass."""
        backup = getattr(self, "_cua_backup", None)
        if backup is None:
            return
        with torch.no_grad():
            for p, saved in zip(self._cua_params(), backup, strict=True):
                p.copy_(saved.to(p.device, p.dtype))
        self._cua_backup = None
