"""The trainer's one success buffer: whole successful trajectories per task instance, each with its action texts
(SDPO's demonstrations) and, when Entropulse or replay needs them, its training rows in step order (one row on the
episode layout, one per step on the step layout) with what replay needs to put them back into a batch."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta

from verl_cua.algos.success_buffer import SuccessBuffer, instance_of, trajectory_key
from verl_cua.integrations.verl.rows.fields import row_values

ROW_FIELDS = ("input_ids", "position_ids", "multi_modal_inputs", "prompts", "responses", "response_mask")
REPLAY_FIELDS = ("rm_scores", "num_turns")


def episode_of(key: str) -> str:
    """The episode of a batch row: `{uid}_{session}` of verl's `{uid}_{session}_{index}` key."""
    return key.rsplit("_", 1)[0]


def episodes(keys: Sequence[str], extra: Sequence[dict]) -> dict[str, list[int]]:
    """{episode: its rows in step order} (`step_index`; episode-layout rows have one row per episode)."""
    out: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(episode_of(key), []).append(i)
    return {ep: sorted(rows, key=lambda i: int(extra[i].get("step_index", 0))) for ep, rows in out.items()}


def buffer_successes(
    buffer: SuccessBuffer,
    batch: KVBatchMeta,
    extra: list[dict],
    with_rows: bool,
    with_rollout_log_probs: bool = False,
) -> int:
    """Add the batch's successful episodes (desktop fine, task solved, not replayed) to the buffer, one trajectory
    each: {"actions": [...], "rows": [...] (empty unless with_rows)}; returns how many trajectories were new."""
    fresh = {
        ep: rows
        for ep, rows in episodes(batch.keys, extra).items()
        if all(extra[i].get("cua_success") and not extra[i].get("cua_infra_failure") for i in rows)
        and not any(extra[i].get("cua_replayed") for i in rows)
    }
    if not fresh:
        return 0
    columns: dict[str, list] = {}
    wanted = [i for rows in fresh.values() for i in rows]
    if with_rows:
        fields = [*ROW_FIELDS, *REPLAY_FIELDS] + (["rollout_log_probs"] if with_rollout_log_probs else [])
        data = tq.kv_batch_get([batch.keys[i] for i in wanted], batch.partition_id, fields)
        columns = {k: row_values(data[k]) for k in fields}
    position = {i: j for j, i in enumerate(wanted)}
    new = 0
    for rows in fresh.values():
        head = extra[rows[0]]
        actions = list(head.get("cua_actions") or [])
        items = []
        for i in rows if with_rows else ():
            item = {k: _detach(v[position[i]]) for k, v in columns.items()}
            # verl averages the loss over loss_mask's tokens; the step's own may be SDPO's reprompted tokens only
            item["loss_mask"] = item["response_mask"].clone()
            item["extra_fields"] = dict(extra[i])
            items.append(item)
        new += int(buffer.add(instance_of(head), trajectory_key(actions), {"actions": actions, "rows": items}))
    return new


def demos(buffer: SuccessBuffer) -> dict[str, list[list[str]]]:
    """SDPO's buffered demonstrations: {task instance: action lists, oldest first}."""
    return {task: [list(t["actions"]) for t in buffer.get(task)] for task in buffer.tasks()}


def _detach(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _detach(v) for k, v in value.items()}
    return value
