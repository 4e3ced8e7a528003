"""ARPO-style replay on verl's V1 trainer, on either row layout: before the batch is balanced (and padded) across
ranks, the last episode of each group whose episodes all failed their task is replaced in TransferQueue by a
buffered success of the same task instance, all of its rows (one per step on the step layout) under the replaced
episode's uid and session, so the group still holds n episodes; the old log-probs are then computed for them under
the current policy like any row."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import torch
import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta

from verl_cua.algos.replay import replay_episodes, replay_keys
from verl_cua.algos.success_buffer import SuccessBuffer, instance_of
from verl_cua.integrations.verl.buffer.success_rows import episode_of, episodes
from verl_cua.integrations.verl.rows.fields import as_list, isolate_infra_uids, put_rows
from verl_cua.integrations.verl.rows.step_fields import StepFieldsView


def inject_replays(
    batch: KVBatchMeta,
    buffer: SuccessBuffer,
    replay: Mapping[str, Any],
    rng: random.Random,
    view: StepFieldsView | None = None,
) -> tuple[KVBatchMeta, dict[str, float]]:
    """The batch with all-fail groups' last episodes replaced by buffered successes (rows and keys may change)."""
    if len(buffer) == 0:
        return batch, {"replay/injected": 0.0, "replay/rows_added": 0.0}
    fields = (view or StepFieldsView()).of(batch)  # the step's view: the hooks after this one fetch nothing again
    extra = fields.extra
    groups = isolate_infra_uids(fields.uids, fields.infra)
    targets = replay_episodes(
        [episode_of(k) for k in batch.keys],
        groups,
        [float(e.get("cua_score", 0.0)) for e in extra],
        [instance_of(e) for e in extra],
        buffer,
        rng,
        std_threshold=float(replay.get("std_threshold", 0.05)),
        mean_threshold=float(replay.get("mean_threshold", 0.2)),
    )
    targets = {ep: t for ep, t in targets.items() if t["rows"]}
    if not targets:
        return batch, {"replay/injected": 0.0, "replay/rows_added": 0.0}
    rows_of = episodes(batch.keys, extra)
    keys, tags = list(batch.keys), [dict(t) for t in batch.tags]
    for ep, trajectory in targets.items():
        victim = rows_of[ep]
        template = tq.kv_batch_get([batch.keys[victim[0]]], batch.partition_id)
        new_keys, dropped = replay_keys([batch.keys[i] for i in victim], len(trajectory["rows"]))
        fields, new_tags = [], []
        for step, item in enumerate(trajectory["rows"]):
            fields.append(_replayed_row(template, item, step))
            tag = dict(batch.tags[victim[0]])
            p, r = int(item["prompts"].shape[0]), int(item["responses"].shape[0])
            tag.update(prompt_len=p, response_len=r, seq_len=p + r)
            new_tags.append(tag)
        if dropped:
            tq.kv_clear(keys=dropped, partition_id=batch.partition_id)
        put_rows(new_keys, batch.partition_id, fields, new_tags)
        at = min(keys.index(batch.keys[i]) for i in victim)
        kept = [(k, t) for k, t in zip(keys, tags, strict=True) if episode_of(k) != ep]
        kept[at:at] = list(zip(new_keys, new_tags, strict=True))
        keys, tags = [k for k, _ in kept], [t for _, t in kept]
    if view is not None:
        view.clear()  # replayed rows overwrite their victims under the same keys: the view's copy is stale
    out = KVBatchMeta(keys=keys, tags=tags, partition_id=batch.partition_id, extra_info=batch.extra_info)
    return out, {"replay/injected": float(len(targets)), "replay/rows_added": float(len(keys) - len(batch.keys))}


def _replayed_row(template, item: dict, step: int) -> dict:
    """One row of a replayed trajectory: its own tokens, images, reward and rollout log-probs; the replaced
    episode's non-tensor fields (uid, session, data source); its own extra fields marked `cua_replayed`."""
    row = {}
    for name in template.keys():
        value = template[name]
        if not isinstance(value, torch.Tensor):
            row[name] = as_list(value)[0]
        elif name not in item:  # a scalar per row (verl's dummy_tensor) is the episode's; tokens: the trajectory's
            own = value[0]
            if own.numel() > 1:
                raise ValueError(f"replay: the batch has a per-token field {name!r} the success buffer did not keep")
            row[name] = own.clone()
    row.update({k: v for k, v in item.items() if k != "extra_fields"})
    row["extra_fields"] = {**item["extra_fields"], "cua_replayed": True}
    if "step_index" in item["extra_fields"]:
        row["extra_fields"]["step_index"] = step
    return row
