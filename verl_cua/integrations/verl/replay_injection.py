"""ARPO-style replay on verl's V1 trainer: before the old log-probs are computed, the last row of each group whose
rollouts all failed is overwritten in TransferQueue by a buffered success of the same task (its tokens, images,
reward and rollout log-probs); the old log-probs are then computed for it under the current policy like any row."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta

from verl_cua.algos.replay import replay_targets
from verl_cua.algos.success_buffer import SuccessBuffer, instance_of
from verl_cua.integrations.verl.batch_rows import as_list, isolate_infra_uids, put_rows


def inject_replays(
    batch: KVBatchMeta, buffer: SuccessBuffer, replay: Mapping[str, Any], rng: random.Random
) -> tuple[KVBatchMeta, dict[str, float]]:
    """Overwrite all-fail groups' last rows with buffered successes (episode-layout rows: one row, one episode)."""
    data = tq.kv_batch_get(batch.keys, batch.partition_id, ["extra_fields", "rm_scores", "uid"])
    extra = [dict(e or {}) for e in as_list(data["extra_fields"])]
    if any("step_index" in e for e in extra) or len(buffer) == 0:
        return batch, {"replay/injected": 0.0}
    uids = [str(u) for u in as_list(data["uid"])]
    rewards = [float(r.sum()) for r in data["rm_scores"].unbind(0)]
    tasks = [instance_of(e) for e in extra]
    infra = [bool(e.get("cua_infra_failure")) for e in extra]
    groups = isolate_infra_uids(uids, infra)
    targets = replay_targets(
        groups,
        rewards,
        tasks,
        buffer,
        rng,
        std_threshold=float(replay.get("std_threshold", 0.05)),
        mean_threshold=float(replay.get("mean_threshold", 0.2)),
    )
    if not targets:
        return batch, {"replay/injected": 0.0}
    rows = sorted(targets)
    fields, tags = [], []
    for i in rows:
        item = targets[i]
        row = {k: v for k, v in item.items() if k != "extra_fields"}
        row["extra_fields"] = {**item["extra_fields"], "cua_replayed": True}
        fields.append(row)
        tag = dict(batch.tags[i])
        p, r = int(row["prompts"].shape[0]), int(row["responses"].shape[0])
        tag.update(prompt_len=p, response_len=r, seq_len=p + r)
        tags.append(tag)
        batch.tags[i] = tag
    put_rows([batch.keys[i] for i in rows], batch.partition_id, fields, tags)
    return batch, {"replay/injected": float(len(rows))}
