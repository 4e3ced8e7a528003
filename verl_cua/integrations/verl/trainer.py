"""`CuaTrainer`: verl's synchronous V1 PPO trainer with CPU support, infra-failure masking, GUI metrics, and the
hook points the SDPO teacher pass and Entropulse fill (`teacher_pass`, `entropulse_step`)."""

from __future__ import annotations

import logging

import numpy as np
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo.ray_trainer import apply_kl_penalty
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.device import get_device_name
from verl.workers.utils.padding import response_to_nested

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
        """verl's advantage step (KL-in-reward, rollout correction, the configured estimator), except that rows
        whose desktop failed leave their group (a singleton group of their own) and get zero advantage."""
        batch = self.teacher_pass(batch, metrics)
        algo = self.config.algorithm
        fields = ["uid", "response_mask", "rm_scores", "rollout_log_probs", "old_log_probs", "ref_log_prob", "values"]
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=[*fields, "extra_fields"]
        )
        infra = infra_rows(_as_list(data.pop("extra_fields")))
        response_mask = data["response_mask"]
        data = DataProto(batch=data.to_padded_tensor())
        data.batch["token_level_scores"] = data.batch["rm_scores"]
        uids = [str(u) for u in data.batch.pop("uid").tolist()]
        data.non_tensor_batch["uid"] = np.array(isolate_infra_uids(uids, infra), dtype=object)
        if algo.use_kl_in_reward:
            data, kl_metrics = apply_kl_penalty(data, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=algo.kl_penalty)
            metrics.update(kl_metrics)
        else:
            data.batch["token_level_rewards"] = data.batch["token_level_scores"]
        corr = algo.get("rollout_correction", None)
        rollout_correction = (
            corr is not None and "rollout_log_probs" in data.batch and not corr.get("bypass_mode", False)
        )
        if rollout_correction:
            data, is_metrics = compute_rollout_correction_and_add_to_batch(data, corr)
            metrics.update(is_metrics)
        data = compute_advantage_for_multi_trajectories(
            data,
            batch_keys=batch.keys,
            adv_estimator=algo.adv_estimator,
            gamma=algo.gamma,
            lam=algo.lam,
            num_repeat=self.config.actor_rollout_ref.rollout.n,
            norm_adv_by_std_in_grpo=algo.get("norm_adv_by_std_in_grpo", True),
            config=algo,
        )
        keep = torch.tensor([0.0 if bad else 1.0 for bad in infra]).unsqueeze(-1)
        data.batch["advantages"] = data.batch["advantages"] * keep
        data.batch["returns"] = data.batch["returns"] * keep
        metrics["cua/infra_rows_masked"] = int(sum(infra))
        out_fields = ["advantages", "returns"]
        if algo.use_kl_in_reward:
            out_fields.append("token_level_rewards")
        if rollout_correction:
            out_fields.append("response_mask")
            if "rollout_is_weights" in data.batch:
                out_fields.append("rollout_is_weights")
        output = {f: response_to_nested(data.batch[f], response_mask) for f in out_fields}
        return tq.kv_batch_put(
            keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(output, batch_size=len(batch))
        )

    def teacher_pass(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """Hook: the SDPO teacher pass (reprompted context, teacher log-probs) runs here; GRPO/GiGPO skip it."""
        return batch

    def entropulse_step(self, metrics: dict) -> None:
        """Hook: the Entropulse schedule switches to SFT phases here, before the weights go to the rollout."""
        return None

    def on_step_end(self):
        self.entropulse_step(getattr(self, "_cua_step_metrics", {}))
        super().on_step_end()

    def _compute_metrics(self, batch: KVBatchMeta, metrics, timing_raw, global_steps, epoch):
        result = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        fields = ["extra_fields", "responses", "response_mask"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        cua = gui_metrics(_as_list(data["extra_fields"]))
        cua.update(mask_metrics(data["responses"], data["response_mask"], self._image_pad_id()))
        self.cua_totals["infra_failures"] += cua.get("cua/infra_failures", 0)
        self.cua_totals["episodes"] += cua.get("cua/episodes", 0)
        cua["cua/infra_failures_total"] = self.cua_totals["infra_failures"]
        metrics.update(cua)
        self._cua_step_metrics = metrics
        return result

    def _image_pad_id(self) -> int | None:
        token = getattr(self.processor, "image_token", None) or "<|image_pad|>"
        pad = self.tokenizer.convert_tokens_to_ids(token)
        return pad if isinstance(pad, int) and pad != self.tokenizer.unk_token_id else None


def mask_metrics(responses, response_mask, image_pad_id: int | None) -> dict[str, float]:
    """How the response mask treats the batch: model tokens (1) vs observation tokens (0), screenshots included."""
    tokens = torch.cat([r.reshape(-1) for r in responses.unbind(0)])
    mask = torch.cat([m.reshape(-1) for m in response_mask.unbind(0)])
    out = {
        "cua/response_model_tokens": int(mask.sum()),
        "cua/response_observation_tokens": int((mask == 0).sum()),
    }
    if image_pad_id is not None:
        image = tokens == image_pad_id
        out["cua/response_image_tokens_masked"] = int((image & (mask == 0)).sum())
        out["cua/response_image_tokens_trained"] = int((image & (mask == 1)).sum())
    return out


def infra_rows(extra_fields: list) -> list[bool]:
    """Which rows come from an episode whose env failed (agent loop `extra_fields["cua_infra_failure"]`)."""
    return [bool((e or {}).get("cua_infra_failure", False)) for e in extra_fields]


def isolate_infra_uids(uids: list[str], infra: list[bool]) -> list[str]:
    """Give each infra-failed row a group of its own, so it neither joins nor shifts its siblings' statistics."""
    return [f"{uid}::infra{i}" if bad else uid for i, (uid, bad) in enumerate(zip(uids, infra, strict=True))]


def _as_list(value) -> list:
    """TransferQueue non-tensor fields come back as NonTensorStack/NonTensorData; give plain Python objects."""
    if hasattr(value, "tolist"):
        return list(value.tolist())
    if hasattr(value, "data"):
        return list(value.data)
    return list(value)
