"""Entropulse on verl's V1 trainer: buffer each step's successful rows, and in an SFT phase run `sft_steps` actor
updates with the SFT loss on them (through TransferQueue, as RL updates go), measuring the policy entropy on the SFT
data before and after."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

import torch
import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta
from verl.utils.metric import reduce_metrics
from verl.utils.py_functional import rename_dict
from verl.workers.utils.padding import response_from_nested

from verl_cua.algos.success_buffer import SuccessBuffer, instance_of, trajectory_key
from verl_cua.integrations.verl.batch_rows import put_rows, row_values

SFT_FIELDS = ("input_ids", "position_ids", "multi_modal_inputs", "prompts", "responses", "response_mask")
REPLAY_FIELDS = ("rm_scores", "num_turns")


def buffer_successes(
    buffer: SuccessBuffer, batch: KVBatchMeta, extra: list[dict], with_rollout_log_probs: bool = False
) -> int:
    """Add the batch's successful rows (desktop fine, task solved) to the buffer, with what replay needs to put
    them back into a batch (reward, turns, rollout log-probs, extra fields); returns how many were new."""
    rows = [i for i, e in enumerate(extra) if e.get("cua_success") and not e.get("cua_infra_failure")]
    if not rows:
        return 0
    fields = [*SFT_FIELDS, *REPLAY_FIELDS] + (["rollout_log_probs"] if with_rollout_log_probs else [])
    data = tq.kv_batch_get([batch.keys[i] for i in rows], batch.partition_id, fields)
    columns = {k: row_values(data[k]) for k in fields}
    new = 0
    for j, i in enumerate(rows):
        item = {k: _detach(columns[k][j]) for k in fields}
        # verl averages the loss over loss_mask's tokens; the step's own loss_mask may be SDPO's reprompted tokens
        item["loss_mask"] = item["response_mask"].clone()
        item["extra_fields"] = dict(extra[i])
        key = f"{trajectory_key(extra[i].get('cua_actions') or [])}#{extra[i].get('step_index', 0)}"
        new += int(buffer.add(instance_of(extra[i]), key, item))
    return new


def run_sft_phase(
    actor_wg,
    buffer: SuccessBuffer,
    steps: int,
    batch_size: int,
    temperature: float,
    set_loss: Callable[[str], None],
    rng: random.Random,
    multiple: int = 1,
) -> dict[str, float]:
    """`steps` SFT updates on batches drawn across tasks from the buffer; the loss is switched to SFT and back.

    Batches are padded by repeating items to a multiple of `multiple` (ranks x micro-batch), as verl requires."""
    metrics: dict[str, float] = {"entropulse/buffer_size": float(len(buffer))}
    if len(buffer) == 0:
        metrics["entropulse/sft_skipped_empty_buffer"] = 1.0
        metrics["entropulse/sft_steps_run"] = 0.0
        return metrics
    losses, before, after = [], (None, None), (None, None)
    set_loss("sft")
    try:
        for step in range(steps):
            items = _pad_to(buffer.sample_all(batch_size, rng), multiple)
            meta = _put(items)
            try:
                if step == 0:
                    before = _entropy(actor_wg, meta, temperature)
                meta.extra_info = {
                    "calculate_entropy": False,
                    "distillation_use_topk": False,
                    "distillation_only": False,
                    "global_batch_size": len(items),
                    "mini_batch_size": len(items),
                    "epochs": 1,
                    "seed": rng.randrange(2**31),
                    "dataloader_kwargs": {"shuffle": False},
                    "temperature": temperature,
                }
                output = actor_wg.update_actor(meta)
                reduced = reduce_metrics(rename_dict(output["metrics"], "actor/"))
                losses.append(float(reduced.get("actor/sft_loss", float("nan"))))
                if step == steps - 1:
                    after = _entropy(actor_wg, meta, temperature)
            finally:
                tq.kv_clear(keys=meta.keys, partition_id=meta.partition_id)
    finally:
        set_loss("rl")
    metrics.update(
        {
            "entropulse/sft_steps_run": float(len(losses)),
            "entropulse/sft_loss": sum(losses) / len(losses),
            "entropulse/sft_loss_first": losses[0],
            "entropulse/sft_loss_last": losses[-1],
            "entropulse/sft_entropy_before": before[0],
            "entropulse/sft_entropy_after": after[0],
            "entropulse/sft_nll_before": before[1],
            "entropulse/sft_nll_after": after[1],
        }
    )
    return metrics


def _put(items: list[dict]) -> KVBatchMeta:
    prefix = f"entropulse_{uuid.uuid4().hex[:12]}"
    keys = [f"{prefix}_{i}" for i in range(len(items))]
    fields = []
    tags = []
    for item in items:
        row = {k: v for k, v in item.items() if k in (*SFT_FIELDS, "loss_mask")}
        fields.append(row)
        p, r = int(row["prompts"].shape[0]), int(row["responses"].shape[0])
        tags.append({"status": "success", "prompt_len": p, "response_len": r, "seq_len": p + r})
    return put_rows(keys, "train", fields, tags)


def _entropy(actor_wg, meta: KVBatchMeta, temperature: float) -> tuple[float, float]:
    """Mean policy entropy and negative log-likelihood over the model tokens of the rows in `meta`."""
    meta.extra_info = {"calculate_entropy": True, "compute_loss": False, "temperature": temperature}
    actor_wg.compute_log_prob(meta)
    out = tq.kv_batch_get(meta.keys, meta.partition_id, ["entropy", "log_probs", "response_mask"])
    mask = torch.cat([m.reshape(-1) for m in out["response_mask"].unbind(0)]).bool()
    means = []
    for name in ("entropy", "log_probs"):
        values = response_from_nested(out[name], out["response_mask"])
        flat = torch.cat([v.float().reshape(-1) for v in values.unbind(0)])
        means.append(float(flat[mask].mean()) if mask.any() else float("nan"))
    return means[0], -means[1]


def _pad_to(items: list, multiple: int) -> list:
    """Repeat items so the batch splits evenly over the ranks; the k-th repeat drops its last k tokens (model tokens
    of the final turn), so no batch is all one length (verl mis-handles those; see the closing note of issue 4)."""
    multiple = max(1, int(multiple))
    out = list(items)
    k = 0
    while len(out) % multiple:
        k += 1
        out.append(_shorter(items[(k - 1) % len(items)], 1 + (k - 1) // len(items)))
    if len(out) > 1 and len({int(item["input_ids"].shape[-1]) for item in out}) == 1:
        out[-1] = _shorter(out[-1], 1)
    return out


def _shorter(item: dict, cut: int) -> dict:
    """`item` without its last `cut` response tokens (when they are model tokens), else unchanged."""
    mask = item["response_mask"]
    if mask.shape[0] <= cut or not bool(mask[-cut:].all()):
        return item
    out = dict(item)
    for key in ("responses", "response_mask", "loss_mask"):
        out[key] = item[key][:-cut]
    for key in ("input_ids", "position_ids"):
        out[key] = item[key][..., :-cut]
    return out


def _detach(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _detach(v) for k, v in value.items()}
    return value
