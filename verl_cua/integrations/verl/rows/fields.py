"""Row-level helpers of the trainer: infra-failed rows, response-mask metrics, TransferQueue non-tensor fields, rows
and per-row fields written to TransferQueue."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch


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


def as_list(value) -> list:
    """TransferQueue non-tensor fields come back as NonTensorStack/NonTensorData; give plain Python objects."""
    if hasattr(value, "tolist"):
        return list(value.tolist())
    if hasattr(value, "data"):
        return list(value.data)
    return list(value)


def row_values(value) -> list:
    """One field of a TransferQueue batch as a per-row list: tensors (nested or not) unbound, the rest as_list."""
    if isinstance(value, torch.Tensor):
        return list(value.unbind(0))
    return as_list(value)


def put_rows(keys: list[str], partition_id: str, rows: list[dict], tags: list[dict]):
    """Write rows to TransferQueue one at a time, as verl's agent loop does: a one-row TensorDict holds plain
    tensors, while a multi-row one would hold jagged tensors whose 3-D M-RoPE position ids TransferQueue splits
    on the wrong dimension. Returns the KVBatchMeta of all rows."""
    import transfer_queue as tq
    from verl.trainer.ppo.v1.trainer_base import KVBatchMeta
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    for key, row, tag in zip(keys, rows, tags, strict=True):
        tq.kv_batch_put(keys=[key], partition_id=partition_id, fields=list_of_dict_to_tensordict([row]), tags=[tag])
    return KVBatchMeta(keys=list(keys), tags=[dict(t) for t in tags], partition_id=partition_id)


def put_row_fields(keys: Sequence[str], partition_id: str, rows: Sequence[dict[str, torch.Tensor]]) -> None:
    """Write per-row fields onto existing TransferQueue rows, one call per set of field shapes."""
    # stacked as plain tensors: TransferQueue splits those on the batch dimension (no jagged split)
    import transfer_queue as tq
    from tensordict import TensorDict

    groups: dict[tuple, list[tuple[str, dict[str, torch.Tensor]]]] = defaultdict(list)
    for key, row in zip(keys, rows, strict=True):
        groups[tuple((name, tuple(value.shape)) for name, value in sorted(row.items()))].append((key, row))
    for members in groups.values():
        names = list(members[0][1])
        stacked = {name: torch.stack([row[name] for _, row in members]) for name in names}
        fields = TensorDict(stacked, batch_size=len(members))
        tq.kv_batch_put(keys=[key for key, _ in members], partition_id=partition_id, fields=fields)
