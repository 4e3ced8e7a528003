"""Entropulse on verl's V1 trainer: in an SFT phase, `sft_steps` actor updates with the SFT loss on the rows of
buffered successful trajectories (through TransferQueue, as RL updates go), measuring the policy entropy on the SFT
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

from verl_cua.algos.success_buffer import SuccessBuffer
from verl_cua.integrations.verl.buffer.success_rows import ROW_FIELDS
from verl_cua.integrations.verl.rows.fields import put_rows

SFT_FIELDS = (*ROW_FIELDS, "loss_mask")


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
    """`steps` SFT updates, each on the rows of `batch_size` trajectories drawn across task instances from the
    buffer (every step of each); the loss is switched to SFT and back.

    Batches are padded by repeating rows to a multiple of `multiple` (ranks x micro-batch), as verl requires."""
    metrics: dict[str, float] = {"entropulse/buffer_size": float(len(buffer))}
    if not any(t["rows"] for task in buffer.tasks() for t in buffer.get(task)):
        metrics["entropulse/sft_skipped_empty_buffer"] = 1.0
        metrics["entropulse/sft_steps_run"] = 0.0
        return metrics
    losses, before, after = [], (None, None), (None, None)
    set_loss("sft")
    try:
        for step in range(steps):
            items = _pad_to(_rows(buffer.sample_all(batch_size, rng)), multiple)
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


def _rows(trajectories: list[dict]) -> list[dict]:
    """Every training row of the sampled trajectories, in step order."""
    return [row for trajectory in trajectories for row in trajectory["rows"]]


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
