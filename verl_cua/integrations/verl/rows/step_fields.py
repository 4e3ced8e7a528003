"""One step's per-row fields that the driver reads: `extra_fields` (final screenshots included), `uid`, `session_id`,
`responses` and `response_mask`. They are fetched from TransferQueue once per batch and handed to each of the step's
hooks: replay, the SDPO teacher pass, the advantage step, the GUI and mask metrics and the success buffer. A batch
whose keys changed is fetched again; `clear` drops the step's copy, at the step's end and when replay rewrote rows in
place (a replayed trajectory takes its victim's keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import transfer_queue as tq

from verl_cua.integrations.verl.rows.fields import as_list, infra_rows

FIELDS = ("extra_fields", "uid", "session_id", "responses", "response_mask")


@dataclass(frozen=True)
class StepFields:
    """The per-row fields of one batch, in its key order."""

    keys: tuple[str, ...]
    extra: list[dict]  # each row's `extra_fields`, as plain dicts
    uids: list[str]
    sessions: list  # each row's episode (`session_id`); the row index for rows without one
    response_mask: Any  # [B, L] tensor, or None when the rows hold none
    responses: Any = None  # [B, L] token ids, or None when the rows hold none

    @property
    def infra(self) -> list[bool]:
        """Which rows come from an episode whose env failed."""
        return infra_rows(self.extra)


def fetch_step_fields(batch: Any) -> StepFields:
    """`FIELDS` of every row of `batch` (a `KVBatchMeta`) in one TransferQueue call. TransferQueue leaves a selected
    field the rows do not hold out of its answer, without an error (rows written without a `session_id`, `responses`
    or `response_mask`: older verl rows, hand-made tests), so those take their defaults; an error it raises (keys or
    partition not found, fields not ready) is a real one and propagates from this one call."""
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=list(FIELDS))
    extra = [dict(e or {}) for e in as_list(data["extra_fields"])]
    uids = [str(u) for u in as_list(data["uid"])]
    names = data.keys()
    return StepFields(
        keys=tuple(batch.keys),
        extra=extra,
        uids=uids,
        sessions=as_list(data["session_id"]) if "session_id" in names else list(range(len(uids))),
        response_mask=data["response_mask"] if "response_mask" in names else None,
        responses=data["responses"] if "responses" in names else None,
    )


class StepFieldsView:
    """The trainer's copy of the current batch's `StepFields`: fetched on first use, again only for new keys."""

    def __init__(self):
        self._current: StepFields | None = None
        self.fetches = 0  # TransferQueue calls made, for the tests and `cua/step_field_fetches`

    def of(self, batch: Any) -> StepFields:
        """The fields of `batch`, fetched unless this view holds them for the same keys already."""
        if self._current is None or self._current.keys != tuple(batch.keys):
            self._current = fetch_step_fields(batch)
            self.fetches += 1
        return self._current

    def clear(self) -> None:
        """Drop the step's copy (its final screenshots) once the step is done."""
        self._current = None
