"""`CuaTrainer`: verl's synchronous V1 PPO trainer with CPU support, infra-failure masking, GUI metrics, and the
hook points the SDPO teacher pass and Entropulse fill (`teacher_pass`, `entropulse_step`)."""

from __future__ import annotations

import logging

import numpy as np
import torch
import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.device import get_device_name

from verl_cua.integrations.verl.metrics import gui_metrics
from verl_cua.integrations.verl.plugin import check_registrations

logger = logging.getLogger(__name__)


class CuaTrainer(PPOTrainerSync):
    """The sync PPO trainer for GUI agents; every verl step is upstream's, with our hooks around it."""

    def __init__(self, config):
        check_registrations()
        super().__init__(config)
        self.cua_totals = {"infra_failures": 0, "episodes": 0}

    # -- CPU -------------------------------------------------------------------------------------------------------
    def _init_resource_pool_mgr(self):
        super()._init_resource_pool_mgr()
        if get_device_name() != "cpu":
            return
        from verl_cua.integrations.verl.cpu.workers import CPUActorRolloutRefWorker, CPUResourcePoolManager

        for role, cls in list(self.role_worker_mapping.items()):
            if getattr(cls, "__ray_metadata__", None) is not None and "ActorRolloutRefWorker" in str(
                cls.__ray_metadata__.class_name
            ):
                import ray

                self.role_worker_mapping[role] = ray.remote(CPUActorRolloutRefWorker)
        self.resource_pool_manager = CPUResourcePoolManager(
            resource_pool_spec=self.resource_pool_manager.resource_pool_spec, mapping=self.mapping
        )

    # -- the step ----------------------------------------------------------------------------------------------------
    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        batch = self.teacher_pass(batch, metrics)
        batch = super()._compute_advantage(batch, metrics)
        return self._mask_infra_failures(batch, metrics)

    def teacher_pass(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """Hook: the SDPO teacher pass (reprompted context, teacher log-probs) runs here; GRPO/GiGPO skip it."""
        return batch

    def entropulse_step(self, metrics: dict) -> None:
        """Hook: the Entropulse schedule switches to SFT phases here, before the weights go to the rollout."""
        return None

    def on_step_end(self):
        self.entropulse_step(getattr(self, "_cua_step_metrics", {}))
        super().on_step_end()

    def _mask_infra_failures(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """Rows whose desktop failed get zero advantage: an infra failure is not the agent's failure."""
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields", "advantages"]
        )
        extra = _as_list(data["extra_fields"])
        infra = np.array([bool((e or {}).get("cua_infra_failure", False)) for e in extra])
        if infra.any():
            advantages = data["advantages"]
            rows = [a * (0.0 if bad else 1.0) for a, bad in zip(advantages.unbind(0), infra, strict=True)]
            nested = torch.nested.as_nested_tensor(rows, layout=torch.jagged)
            from tensordict import TensorDict

            batch = tq.kv_batch_put(
                keys=batch.keys,
                partition_id=batch.partition_id,
                fields=TensorDict({"advantages": nested}, batch_size=len(batch)),
            )
        metrics["cua/infra_failures_masked"] = int(infra.sum())
        return batch

    def _compute_metrics(self, batch: KVBatchMeta, metrics, timing_raw, global_steps, epoch):
        result = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        cua = gui_metrics(_as_list(data["extra_fields"]))
        self.cua_totals["infra_failures"] += cua.get("cua/infra_failures", 0)
        self.cua_totals["episodes"] += cua.get("cua/episodes", 0)
        cua["cua/infra_failures_total"] = self.cua_totals["infra_failures"]
        metrics.update(cua)
        self._cua_step_metrics = metrics
        return result


def _as_list(value) -> list:
    """TransferQueue non-tensor fields come back as NonTensorStack/NonTensorData; give plain Python objects."""
    if hasattr(value, "tolist"):
        return list(value.tolist())
    if hasattr(value, "data"):
        return list(value.data)
    return list(value)
