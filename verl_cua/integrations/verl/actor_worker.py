"""verl's actor/rollout/ref worker plus the SDPO EMA teacher: an exponential moving average of the actor's weights,
kept on the host next to each rank's own shard, swapped into the actor for the teacher pass, and saved and loaded with
verl's actor checkpoint (one file per rank inside its `actor` folder, so verl's retention removes it with the rest)."""

from __future__ import annotations

import torch
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.workers.engine_workers import ActorRolloutRefWorker

from verl_cua.algos.ema import ema_copy, ema_distance, ema_restore, ema_swap_in, ema_update
from verl_cua.integrations.verl.resume.checkpoint_io import (
    content_digest,
    ema_shard_path,
    load_tensor_file,
    save_tensor_file,
)
from verl_cua.integrations.verl.sdpo import logit
from verl_cua.integrations.verl.sdpo.logit import mark_teacher_weights, pack_pass_output


def _local(param: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a parameter (FSDP2 DTensor) or the parameter itself."""
    return param.to_local() if hasattr(param, "to_local") else param.data


class CuaActorRolloutRefWorker(ActorRolloutRefWorker):
    """Adds the EMA teacher (`cua_ema_*`, every actor rank on its own shard) and keeps it in verl's checkpoints."""

    def _cua_params(self) -> list[torch.Tensor]:
        return [_local(p) for p in self.actor.engine.module.parameters()]

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
    def compute_log_prob(self, data):
        """verl's log-prob pass; an SDPO top-k pass's output keeps only its response positions, in one field."""
        output = super().compute_log_prob(data)
        if output is None or logit.field(0) not in output.keys():
            return output
        return pack_pass_output(output, data["response_mask"])

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None):
        """verl's actor checkpoint, then this rank's EMA teacher shard beside it (fp32, written atomically)."""
        result = super().save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)
        ema = getattr(self, "_cua_ema", None)
        if ema is not None:
            save_tensor_file(ema, ema_shard_path(local_path, self.rank))
        return result

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False):
        """verl's actor checkpoint, then this rank's EMA teacher shard when the checkpoint holds one."""
        shard = ema_shard_path(local_path, self.rank)
        ema = load_tensor_file(shard) if shard.is_file() else None  # before verl may delete the local copy
        result = super().load_checkpoint(local_path, hdfs_path, del_local_after_load)
        if ema is not None:
            shapes = [tuple(p.shape) for p in self._cua_params()]
            if [tuple(t.shape) for t in ema] != shapes:
                raise RuntimeError(f"{shard}: its shapes do not match this rank's parameters (other model or sharding)")
            self._cua_ema = ema
        return result

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_start(self) -> bool:
        """Start the EMA teacher as the current policy unless a checkpoint restored it; whether it was restored."""
        if getattr(self, "_cua_ema", None) is not None:
            return True
        self.cua_ema_update(1.0)
        return False

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_digest(self) -> str | None:
        """The content digest of this rank's EMA teacher shard (None before it starts)."""
        ema = getattr(self, "_cua_ema", None)
        return None if ema is None else content_digest(ema)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_update(self, rate: float) -> None:
        """theta_T <- (1 - rate) theta_T + rate theta (the first call copies theta); fp32, on the host."""
        params = self._cua_params()
        ema = getattr(self, "_cua_ema", None)
        if ema is None or rate == 1.0:
            self._cua_ema = ema_copy(params)
            return
        ema_update(ema, params, rate)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_swap_in(self) -> None:
        """Put the EMA weights into the actor (the current ones go to a host backup)."""
        self._cua_backup = ema_swap_in(self._cua_ema, self._cua_params())
        mark_teacher_weights(True)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_swap_out(self) -> None:
        """Restore the actor's own weights after the teacher pass."""
        backup = getattr(self, "_cua_backup", None)
        if backup is None:
            return
        ema_restore(self._cua_params(), backup)
        self._cua_backup = None
        mark_teacher_weights(False)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def cua_ema_distance(self) -> tuple[float, float]:
        """This rank's squared L2 distance between the EMA teacher and the actor, and the actor's squared norm."""
        ema = getattr(self, "_cua_ema", None)
        return (0.0, 0.0) if ema is None else ema_distance(ema, self._cua_params())
