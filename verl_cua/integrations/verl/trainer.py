"""`CuaTrainer`: verl's synchronous V1 PPO trainer with CPU support, infra-failure masking, GUI metrics, and the
hook points the SDPO teacher pass and Entropulse fill (`teacher_pass`, `entropulse_step`)."""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import numpy as np
import torch
from omegaconf import OmegaConf, open_dict
from verl.protocol import DataProto
from verl.trainer.ppo.v1 import trainer_base
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.device import get_device_name
from verl.utils.profiler import marked_timer

from verl_cua.algos.entropulse import Entropulse
from verl_cua.algos.success_buffer import SuccessBuffer
from verl_cua.integrations.verl.actor_loss import cua_actor_loss
from verl_cua.integrations.verl.buffer.entropulse import run_sft_phase
from verl_cua.integrations.verl.buffer.replay import inject_replays
from verl_cua.integrations.verl.buffer.success_rows import buffer_successes, demos
from verl_cua.integrations.verl.config.checks import validate_estimator_config
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import AdvantageStep, plan_for
from verl_cua.integrations.verl.metrics import gui_metrics
from verl_cua.integrations.verl.plugin import check_registrations
from verl_cua.integrations.verl.resume.checkpoint_io import prune_orphans, read_state_dir, write_state_dir
from verl_cua.integrations.verl.resume.outputs import keep_metrics_through, set_aside_trace_steps
from verl_cua.integrations.verl.resume.state import (
    load_trainer_state,
    refuse_conflicts,
    resume_folder,
    setting_values,
    state_digests,
    trainer_state,
)
from verl_cua.integrations.verl.rows.fields import isolate_infra_uids, mask_metrics
from verl_cua.integrations.verl.rows.step_fields import StepFieldsView
from verl_cua.integrations.verl.rows.thin_groups import settle_groups, small_groups
from verl_cua.integrations.verl.sdpo import logit
from verl_cua.integrations.verl.sdpo.context import TeacherContextBuilder
from verl_cua.integrations.verl.sdpo.teacher_pass import TeacherResult, run_teacher_pass
from verl_cua.integrations.verl.step_line import StepLines
from verl_cua.integrations.verl.trace.episodes import MarkValidation, write_advantages, write_trace_run
from verl_cua.integrations.verl.trace.logger import log_trace_step

logger = logging.getLogger(__name__)

# verl's replay buffer looks for finished rollouts every 2 s (a constructor default no config key reaches), so every
# rollout phase lasts a whole number of 2-second ticks: on the CPU, gen read 6.02 / 8.04 s for ~5 s of work. One look
# is a `kv_list` of every key in TransferQueue; CPU runs (a few dozen keys) look every 0.1 s, so a phase ends within
# 0.1 s of its last episode. GPU rollouts take minutes and hold far more keys: verl's 2 s stays.
SAMPLE_POLL_S = 0.1


def epochs_for_steps(total_training_steps: int | None, steps_per_epoch: int, total_epochs: int) -> int:
    """`total_epochs`, raised to cover `total_training_steps` when set (verl silently stops at the epochs' end)."""
    if total_training_steps is None or total_training_steps <= 0 or steps_per_epoch <= 0:
        return total_epochs
    return max(total_epochs, math.ceil(total_training_steps / steps_per_epoch))


def _estimate(trainer: CuaTrainer, step: AdvantageStep, metrics: dict, upstream, data: DataProto, **kwargs):
    """verl's estimator on `data`, infra rows in singleton groups; then ours (`CuaTrainer.cua_advantages`)."""
    uids = [str(u) for u in data.non_tensor_batch["uid"]]
    data.non_tensor_batch["uid"] = np.array(isolate_infra_uids(uids, step.fields.infra), dtype=object)
    kwargs["adv_estimator"] = step.plan.outcome_estimator  # sdpo/gigpo start from GRPO's outcome advantages
    data = upstream(data, **kwargs)
    trainer.cua_advantages(data, step, metrics)
    return data


@contextmanager
def estimator_hook(trainer: CuaTrainer, step: AdvantageStep, metrics: dict) -> Iterator[None]:
    """Route verl's one estimator call (`PPOTrainer._compute_advantage`) through `_estimate` inside the block."""
    upstream = trainer_base.compute_advantage_for_multi_trajectories
    trainer_base.compute_advantage_for_multi_trajectories = partial(_estimate, trainer, step, metrics, upstream)
    try:
        yield
    finally:
        trainer_base.compute_advantage_for_multi_trajectories = upstream


class CuaTrainer(PPOTrainerSync):
    """The sync PPO trainer for GUI agents; every verl step is upstream's, with our hooks around it."""

    def __init__(self, config):
        check_registrations()
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

        container = OmegaConf.to_container(config, resolve=True)
        cua = CuaConfig.from_mapping(container["cua"])  # parsed once: the checks, the plan and every hook read it
        validate_estimator_config(container, registered=tuple(ADV_ESTIMATOR_REGISTRY), cua=cua)
        plan = plan_for(config.algorithm.adv_estimator, cua)  # what each step does, decided once (estimator_plan)
        if plan.needs_entropy:  # a hook's loss term reads the update's per-token entropy (CoSo's bonus)
            with open_dict(config):
                config.actor_rollout_ref.actor.calculate_entropy = True
        super().__init__(config)
        self.cua, self.plan = cua, plan
        self.cua_totals = {"infra_failures": 0, "episodes": 0}
        self.step_fields = StepFieldsView()  # the batch's extra fields, fetched once a step for every hook
        self._state_settings = setting_values(container)  # what a checkpoint's state depends on (resume/state.py)
        self.estimator = config.algorithm.adv_estimator
        self.entropulse = Entropulse(self.cua.entropulse)  # the validated section: its bounds are checked once
        # successful trajectories per task instance: SDPO's demos, and (with their rows) Entropulse SFT and replay
        self.success_buffer = SuccessBuffer(self.cua.buffer.per_task)
        self._cua_rng = random.Random(int(config.actor_rollout_ref.actor.get("data_loader_seed") or 0))
        self._teacher_builder = None
        self._step_metrics: dict = {}
        self._step_lines: StepLines | None = None

    # -- the run's length and its sampling ------------------------------------------------------------------------
    def _build_replay_buffer(self):
        buffer = super()._build_replay_buffer()
        cpu = self.config.trainer.get("device") == "cpu"
        if cpu and isinstance(getattr(buffer, "poll_interval", None), int | float):  # a custom sampler may poll faster
            buffer.poll_interval = min(buffer.poll_interval, SAMPLE_POLL_S)
        return buffer

    def _init_dataloader(self):
        super()._init_dataloader()
        steps, epochs = self.config.trainer.total_training_steps, int(self.config.trainer.total_epochs)
        needed = epochs_for_steps(steps, self.steps_per_epoch, epochs)
        if needed != epochs:
            logger.warning(
                f"verl-cua: trainer.total_training_steps={steps} needs {needed} epochs of {self.steps_per_epoch} "
                f"steps; raising trainer.total_epochs from {epochs} to {needed} (verl would stop at step "
                f"{epochs * self.steps_per_epoch})"
            )
            with open_dict(self.config):
                self.config.trainer.total_epochs = needed

    # -- losses ------------------------------------------------------------------------------------------------------
    def on_init_end(self):
        super().on_init_end()
        if self.plan.sdpo_loss or any(hook.loss for hook in self.plan.hooks):
            self._set_actor_loss("rl")
        if self.plan.host_teacher:  # the teacher's copy starts as the initial policy, unless the checkpoint held one
            self.actor_rollout_wg.cua_ema_start()

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        if self.plan.logit_loss:
            batch = self._update_actor_with_logits(batch, metrics)
        else:
            batch = super()._update_actor(batch, metrics)
        for hook in [h for h in self.plan.hooks if h.loss]:  # a loss term's metrics (actor/coso/...) under coso/
            for key in [k for k in metrics if k.startswith(f"actor/{hook.name}/")]:
                metrics[key.removeprefix("actor/")] = metrics.pop(key)
        if self.plan.ema_rate > 0:  # only the ema teacher follows the policy
            self.actor_rollout_wg.cua_ema_update(self.plan.ema_rate)
        return batch

    def _update_actor_with_logits(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """verl's update, with the logits processor on (verl switches it on for its own distillation only)."""
        update = self.actor_rollout_wg.update_actor

        def update_with_logits(meta):
            meta.extra_info.update({"distillation_use_topk": True, logit.PASS: "train"})
            return update(meta)

        self.actor_rollout_wg.update_actor = update_with_logits
        try:
            return super()._update_actor(batch, metrics)
        finally:
            self.actor_rollout_wg.update_actor = update  # verl binds worker-group methods per instance

    def _actor_config(self):
        actor = OmegaConf.create(OmegaConf.to_container(self.config.actor_rollout_ref.actor, resolve=True))
        return omega_conf_to_dataclass(actor)

    def _set_actor_loss(self, phase: str) -> None:
        """Ship the actor loss for `phase` ("rl": the estimator's, "sft": Entropulse's) to every actor rank."""
        if phase == "sft":
            fn = partial(cua_actor_loss, config=self._actor_config(), mode="sft")
        else:  # sdpo_grpo's token-level loss is the plan's word (`plan.sdpo_loss`), not a rewritten cua.sdpo.loss
            mode = "sdpo" if self.plan.sdpo_loss else "ppo"
            fn = partial(cua_actor_loss, config=self._actor_config(), mode=mode, plan=self.plan, cua=self.cua)
        self.actor_rollout_wg.set_loss_fn(fn)

    # -- CPU -------------------------------------------------------------------------------------------------------
    def _init_resource_pool_mgr(self):
        super()._init_resource_pool_mgr()
        import ray

        cpu = get_device_name() == "cpu"
        if cpu:
            from verl_cua.integrations.verl.cpu.workers import CPUActorRolloutRefWorker as worker_cls
        else:
            from verl_cua.integrations.verl.actor_worker import CuaActorRolloutRefWorker as worker_cls
        for role, cls in list(self.role_worker_mapping.items()):
            meta = getattr(cls, "__ray_metadata__", None)
            if meta is not None and str(meta.class_name).split(".")[-1] == "ActorRolloutRefWorker":
                self.role_worker_mapping[role] = ray.remote(worker_cls)
        if not cpu:
            return
        from verl_cua.integrations.verl.cpu.workers import CPUResourcePoolManager

        self.resource_pool_manager = CPUResourcePoolManager(
            resource_pool_spec=self.resource_pool_manager.resource_pool_spec, mapping=self.mapping
        )

    # -- the step ----------------------------------------------------------------------------------------------------
    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """verl's advantage step (KL-in-reward, rollout correction, the estimator, the write-back) with ours around
        the estimator: rows whose desktop failed leave their group and get zero advantage, a GRPO group whose
        rollouts all scored the same gets exactly zero (verl's float32 mean leaves a residue there), and
        sdpo/sdpo_grpo/gigpo turn GRPO's outcome advantages into theirs."""
        teacher = self.teacher_pass(batch, metrics)
        step = AdvantageStep(self.plan, self.cua, batch, self.step_fields.of(batch), teacher)
        with estimator_hook(self, step, metrics):
            return super()._compute_advantage(batch, metrics)

    def cua_advantages(self, data: DataProto, step: AdvantageStep, metrics: dict) -> None:
        """Our part of the advantage step, on verl's batch right after its estimator ran (in place): groups settled,
        then each of the plan's step hooks (`hooks.StepHook`) in order, then rows that train on nothing zeroed."""
        extra, infra = step.fields.extra, step.fields.infra
        metrics.update(settle_groups(data, step.batch.keys, self.plan.outcome_estimator, infra))
        # a group infra failures left with fewer than 2 valid episodes contributes nothing, whatever the estimator:
        # GRPO's part is settled above; GiGPO's step part and SDPO's teacher signal and loss are not zero for it
        lone, _ = small_groups(step.batch.keys, data.non_tensor_batch["uid"], infra)
        step.excluded = [bad or alone for bad, alone in zip(infra, lone, strict=True)]
        for hook in self.plan.hooks:
            metrics.update(hook.apply(data, step))
        keep = torch.tensor([0.0 if out else 1.0 for out in step.excluded]).unsqueeze(-1)
        data.batch["advantages"] = data.batch["advantages"] * keep
        data.batch["returns"] = data.batch["returns"] * keep
        metrics["cua/infra_rows_masked"] = int(sum(infra))
        if any(e.get("cua_trace_dir") for e in extra):
            metrics["cua/traced_episodes"] = write_advantages(
                extra, data.batch["advantages"], data.batch["response_mask"]
            )
            write_trace_run(self.cua, self.config, self.global_steps)
            metrics["cua/logged_episodes"] = log_trace_step(getattr(self, "logger", None), self.cua, self.global_steps)

    def teacher_pass(self, batch: KVBatchMeta, metrics: dict) -> TeacherResult | None:
        """The SDPO teacher pass (reprompted contexts scored on the actor) for estimator sdpo/sdpo_grpo, else None."""
        if not self.plan.teacher_pass:
            return None
        if self._teacher_builder is None:
            self._teacher_builder = TeacherContextBuilder(self.tokenizer, self.processor)
        with marked_timer("sdpo_teacher", self.timing_raw, color="purple"):
            result = run_teacher_pass(
                self.actor_rollout_wg,
                self._teacher_builder,
                batch,
                self.step_fields.of(batch),
                self.plan,  # sdpo_grpo: no top-k passes (`plan.topk_passes`), its loss is token-level
                self.cua.sdpo,
                self.config.actor_rollout_ref.rollout.temperature,
                multiple=self._row_multiple(),
                buffer_demos=demos(self.success_buffer),
                teacher_weights=self._teacher_weights,
            )
        metrics.update(result.metrics)
        metrics["sdpo/teacher_is_ema"] = float(self.cua.sdpo.teacher == "ema")
        metrics["sdpo/teacher_is_frozen"] = float(self.cua.sdpo.teacher == "frozen")
        if self.plan.host_teacher:  # how far the teacher's weights are from the policy's (relative L2, all ranks)
            gaps, norms = zip(*self.actor_rollout_wg.cua_ema_distance(), strict=True)
            metrics["sdpo/ema_actor_distance"] = math.sqrt(sum(gaps) / max(sum(norms), 1e-30))
        return result

    @contextmanager
    def _teacher_weights(self) -> Iterator[None]:
        """The teacher's weights on the actor for the teacher's scoring: the EMA swapped in and out, or the live
        policy's. The student's top-k ids (logit loss) are taken outside it, from the live policy."""
        if not self.plan.host_teacher:
            yield
            return
        self.actor_rollout_wg.cua_ema_swap_in()
        try:
            yield
        finally:
            self.actor_rollout_wg.cua_ema_swap_out()

    def _row_multiple(self) -> int:
        """Batches our extra passes send to the actor must split over its ranks and micro-batches."""
        ref = self.config.actor_rollout_ref
        micro = 1
        if not ref.actor.get("use_dynamic_bsz", False):
            sizes = [
                ref.rollout.get("log_prob_micro_batch_size_per_gpu"),
                ref.actor.get("ppo_micro_batch_size_per_gpu"),
            ]
            micro = math.lcm(*[int(s) for s in sizes if s]) if any(sizes) else 1
        return int(self.actor_rollout_wg.world_size) * micro

    # -- Entropulse --------------------------------------------------------------------------------------------------
    def step(self, metrics: dict, timing_raw: dict) -> KVBatchMeta:
        self.step_fields.fetches = 0
        batch = super().step(metrics, timing_raw)
        self._step_metrics = metrics
        fields = self.step_fields.of(batch)  # the fields the advantage step read: no second fetch
        extra = fields.extra
        # the step's GUI and mask metrics and the run's totals, inside the step so that verl's checkpoint of it holds
        # them; `_compute_metrics` reports them after the view is cleared below
        self._step_gui = gui_metrics(extra)
        if fields.responses is not None and fields.response_mask is not None:
            self._step_gui.update(mask_metrics(fields.responses, fields.response_mask, self._image_pad_id()))
        self.cua_totals["infra_failures"] += int(self._step_gui.get("cua/infra_failures", 0))
        self.cua_totals["episodes"] += int(self._step_gui.get("cua/episodes", 0))
        self._buffer_successes(batch, extra, metrics)
        self.entropulse_step(metrics)  # inside the step: verl's checkpoint of this step then holds the SFT phase
        metrics["cua/step_field_fetches"] = self.step_fields.fetches
        self.step_fields.clear()
        return batch

    def _wants_rows(self) -> bool:
        return self.cua.entropulse.schedule != "none" or self.cua.replay.enable

    def _buffer_successes(self, batch: KVBatchMeta, extra: list[dict], metrics: dict) -> None:
        """Keep this step's successful trajectories (`extra`: the batch's extra fields): their actions (SDPO demos),
        and their rows when Entropulse or replay will train on them."""
        if not self.plan.teacher_pass and not self._wants_rows():
            return
        with_lp = bool(self.config.actor_rollout_ref.rollout.get("calculate_log_probs", False))
        new = buffer_successes(self.success_buffer, batch, extra, self._wants_rows(), with_rollout_log_probs=with_lp)
        metrics["buffer/new_successes"] = float(new)
        metrics["buffer/size"] = float(len(self.success_buffer))

    def _balance_batch(self, batch: KVBatchMeta, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        replay = self.cua.replay
        if replay.enable:  # before verl pads the batch to its rank multiple: replay may change its size
            batch, replay_metrics = inject_replays(batch, self.success_buffer, replay, self._cua_rng, self.step_fields)
            metrics.update(replay_metrics)
        return super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)

    def entropulse_step(self, metrics: dict) -> None:
        """After an RL step: let the schedule decide; in an SFT phase, SFT on buffered successes, then resume RL."""
        pulse = self.cua.entropulse
        if pulse.schedule == "none":
            return
        entropy = metrics.get("actor/entropy")
        phase = self.entropulse.observe(None if entropy is None else float(entropy))
        if phase == "sft":
            with marked_timer("entropulse_sft", self.timing_raw, color="magenta"):
                metrics.update(
                    run_sft_phase(
                        self.actor_rollout_wg,
                        self.success_buffer,
                        steps=pulse.sft_steps,
                        batch_size=pulse.sft_batch_size,
                        temperature=self.config.actor_rollout_ref.rollout.temperature,
                        set_loss=self._set_actor_loss,
                        rng=self._cua_rng,
                        multiple=self._row_multiple(),
                    )
                )
            if self.plan.ema_rate > 0 and metrics.get("entropulse/sft_steps_run", 0):
                self.actor_rollout_wg.cua_ema_update(self.plan.ema_rate)
            metrics["entropulse/phase"] = 1.0
            self.entropulse.sft_done(steps_run=int(metrics.get("entropulse/sft_steps_run", 0)))
            metrics.update({k: v for k, v in self.entropulse.metrics().items() if k != "entropulse/phase"})
        else:
            metrics.update(self.entropulse.metrics())

    def on_validate_begin(self):
        super().on_validate_begin()
        if self.cua.trace.dir:
            self.val_dataloader = MarkValidation(self.val_dataloader)

    def on_validate_end(self):
        if isinstance(self.val_dataloader, MarkValidation):
            self.val_dataloader = self.val_dataloader.loader
        super().on_validate_end()

    # -- checkpoints -------------------------------------------------------------------------------------------------
    def _step_folder(self) -> str:
        return os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")

    def _save_checkpoint(self):
        """Our state into `global_step_N/cua/` first (atomically), then verl's save (actor with our EMA shards,
        dataloader, then the tracker that makes the step resumable); our state of steps whose actor verl removed
        goes with it."""
        t0 = time.perf_counter()
        manifest = write_state_dir(
            self._step_folder(),
            trainer_state(self),
            {"global_step": int(self.global_steps), "settings": self._state_settings},
        )
        seconds = time.perf_counter() - t0
        super()._save_checkpoint()
        prune_orphans(self.config.trainer.default_local_dir)
        self._step_metrics["checkpoint/cua_state_mb"] = manifest["files"]["state.pt"]["bytes"] / 2**20
        self._step_metrics["checkpoint/cua_state_s"] = seconds

    def _load_checkpoint(self):
        """verl's resume (actor with our EMA shards, dataloader, step), then our state from the same folder."""
        super()._load_checkpoint()
        self._resumed_step = int(self.global_steps)
        if self.global_steps <= 0:
            return
        trainer = self.config.trainer
        folder = resume_folder(OmegaConf.to_container(trainer, resolve=True))  # the folder verl just loaded
        saved = read_state_dir(folder)
        if saved is None:
            logger.warning(
                f"verl-cua: {folder} holds no verl-cua state (saved by another trainer or an older verl-cua): "
                "Entropulse, the success buffer and the EMA teacher start fresh"
            )
            return
        state, manifest = saved
        if not self.cua.resume.allow_changes:  # main checked this before Ray; other entry points may not have
            refuse_conflicts(folder, manifest, self._state_settings)
        load_trainer_state(self, state)
        set_aside_trace_steps(self.cua.trace.dir, self.global_steps, bool(trainer.get("val_before_train", True)))
        report = {"step": int(self.global_steps), "folder": folder, **state_digests(trainer_state(self))}
        report["buffer_trajectories"] = len(self.success_buffer)
        report["entropulse_sft_phases"] = self.entropulse.phases_completed
        if self.plan.host_teacher:
            report["ema_teacher"] = self.actor_rollout_wg.cua_ema_digest()
        print(f"verl-cua resumed: {json.dumps(report, sort_keys=True)}", flush=True)

    def fit(self, agent_loop_manager):
        """verl's training loop; a resumed run's metrics file keeps the steps its checkpoint holds."""
        with keep_metrics_through(getattr(self, "_resumed_step", 0)):
            return super().fit(agent_loop_manager)

    def _compute_metrics(self, batch: KVBatchMeta, metrics, timing_raw, global_steps, epoch):
        result = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        cua = dict(self._step_gui)  # computed in `step` from the same batch's fields (one fetch a step)
        cua["cua/infra_failures_total"] = self.cua_totals["infra_failures"]
        metrics.update(cua)
        if getattr(self, "_step_lines", None) is None:  # (tests build a trainer without its __init__)
            self._step_lines = StepLines(getattr(self, "total_training_steps", None))
        self._step_lines.print(int(global_steps), metrics)
        return result

    def _image_pad_id(self) -> int | None:
        token = getattr(self.processor, "image_token", None) or "<|image_pad|>"
        pad = self.tokenizer.convert_tokens_to_ids(token)
        return pad if isinstance(pad, int) and pad != self.tokenizer.unk_token_id else None
