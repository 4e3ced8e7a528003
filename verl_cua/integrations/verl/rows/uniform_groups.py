"""Groups whose rollouts all scored the same carry no outcome signal: find them, and give them exactly zero GRPO
advantage. verl 0.9.1's GRPO does not: it takes the group mean in float32, and for a reward that float32 cannot
hold exactly (the -0.1 invalid-action penalty) a group of 8 identical scores gets a mean one ulp off, which
(x - mean) / (std + 1e-6) blows up to as much as about 0.06 on every member (0.9 x 8 gives -0.056 each, -0.2 x 8
+0.0147), all with one sign. Upstream: verl-project/verl#4597 and #4598, unmerged in 0.9.1."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from verl_cua.algos.grouping import is_uniform


def session_finals(batch_keys: Sequence[str]) -> list[int]:
    """Row index of each session's final output, as verl's multi-trajectory GRPO reads it from
    `{uid}_{session_id}_{index}` keys (the highest index of each session), in first-appearance order."""
    finals: dict[str, tuple[int, int]] = {}
    for row, key in enumerate(batch_keys):
        uid, session, index = key.rsplit("_", 2)
        session_key = f"{uid}_{session}"
        if session_key not in finals or finals[session_key][0] < int(index):
            finals[session_key] = (int(index), row)
    return [row for _, row in finals.values()]


def uniform_groups(batch_keys: Sequence[str], uids: Sequence[str], scores: torch.Tensor) -> tuple[list[bool], int, int]:
    """Per row: whether its group (uid, over sessions' final outputs, 2 or more of them) scored uniformly; plus
    the number of uniform groups and of groups with 2 or more sessions."""
    members: dict[str, list[float]] = {}
    for row in session_finals(batch_keys):
        members.setdefault(str(uids[row]), []).append(float(scores[row]))
    uniform = {uid for uid, values in members.items() if len(values) > 1 and is_uniform(values)}
    groups = sum(len(values) > 1 for values in members.values())
    return [str(uid) in uniform for uid in uids], len(uniform), groups


def settle_uniform_groups(data, batch_keys: Sequence[str], estimator: str) -> dict[str, float]:
    """After verl's advantage step: zero the advantages and returns of uniformly scored groups when the estimator
    is `grpo` (others keep verl's values); returns `cua/uniform_reward_groups`, the share of groups (2 or more
    sessions) with no outcome signal, for any estimator."""
    scores = data.batch["token_level_rewards"].sum(-1)
    rows, uniform, groups = uniform_groups(batch_keys, data.non_tensor_batch["uid"], scores)
    if estimator == "grpo" and uniform:
        tie = torch.tensor(rows, dtype=torch.bool)
        for field in ("advantages", "returns"):
            data.batch[field][tie] = 0.0
    return {"cua/uniform_reward_groups": uniform / groups if groups else 0.0}
