"""Groups that infra failures left with fewer than 2 valid episodes: no group-relative signal, so exactly zero GRPO
advantage. The trainer moves each infra-failed row into a group of its own (`isolate_infra_uids`); verl 0.9.1's GRPO
then gives a group of one mean 0 and std 1, so a lone surviving episode would train on its raw score."""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from verl_cua.integrations.verl.rows.uniform_groups import session_finals, settle_uniform_groups

_INFRA_SUFFIX = re.compile(r"::infra\d+$")  # what isolate_infra_uids appends to an infra-failed row's uid


def small_groups(batch_keys: Sequence[str], uids: Sequence[str], infra: Sequence[bool]) -> tuple[list[bool], int]:
    """Per row: whether its prompt's group had 2 or more sessions of which fewer than 2 are valid (not infra
    failures); plus the number of such groups. Groups of one by design (`rollout.n=1`) are left alone."""
    sessions: dict[str, list[bool]] = {}
    for row in session_finals(batch_keys):
        sessions.setdefault(_INFRA_SUFFIX.sub("", str(uids[row])), []).append(not infra[row])
    small = {uid for uid, valid in sessions.items() if len(valid) > 1 and sum(valid) < 2}
    return [_INFRA_SUFFIX.sub("", str(uid)) in small for uid in uids], len(small)


def settle_small_groups(data, batch_keys: Sequence[str], estimator: str, infra: Sequence[bool]) -> dict[str, int]:
    """After verl's advantage step: zero the advantages and returns of every row of a group left with fewer than 2
    valid episodes when the estimator is `grpo` (others keep verl's values); `cua/groups_too_small` counts them."""
    rows, count = small_groups(batch_keys, data.non_tensor_batch["uid"], infra)
    if estimator == "grpo" and count:
        lone = torch.tensor(rows, dtype=torch.bool)
        for field in ("advantages", "returns"):
            data.batch[field][lone] = 0.0
    return {"cua/groups_too_small": count}


def settle_groups(data, batch_keys: Sequence[str], estimator: str, infra: Sequence[bool]) -> dict[str, float]:
    """The trainer's group settling after verl's estimator: uniformly scored groups, then groups too small."""
    metrics: dict[str, float] = dict(settle_uniform_groups(data, batch_keys, estimator))
    metrics.update(settle_small_groups(data, batch_keys, estimator, infra))
    return metrics
