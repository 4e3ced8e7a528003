"""ARPO-style success replay: put a buffered success into groups whose rollouts all failed (pure Python)."""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from typing import Any

from verl_cua.algos.success_buffer import SuccessBuffer


def replay_targets(
    groups: Sequence[Hashable],
    rewards: Sequence[float],
    tasks: Sequence[str],
    buffer: SuccessBuffer,
    rng: random.Random,
    std_threshold: float = 0.05,
    mean_threshold: float = 0.2,
) -> dict[int, Any]:
    """{row: buffered success} for the last row of each all-fail group (population std and mean of `rewards`, one
    per row, under the thresholds); rows are episodes here (`replay_episodes` maps training rows onto them)."""
    if not len(groups) == len(rewards) == len(tasks):
        raise ValueError(f"lengths differ: groups {len(groups)}, rewards {len(rewards)}, tasks {len(tasks)}")
    rows_of: dict[Hashable, list[int]] = {}
    for i, group in enumerate(groups):
        rows_of.setdefault(group, []).append(i)
    targets: dict[int, Any] = {}
    for rows in rows_of.values():
        if len(rows) < 2:
            continue
        values = [float(rewards[i]) for i in rows]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        if std >= std_threshold or mean >= mean_threshold:
            continue
        picked = buffer.sample(tasks[rows[-1]], 1, rng)
        if picked:
            targets[rows[-1]] = picked[0]
    return targets


def replay_episodes(
    episodes: Sequence[Hashable],
    groups: Sequence[Hashable],
    scores: Sequence[float],
    tasks: Sequence[str],
    buffer: SuccessBuffer,
    rng: random.Random,
    std_threshold: float = 0.05,
    mean_threshold: float = 0.2,
) -> dict[Hashable, Any]:
    """Row-level input (one entry per training row; an episode's rows share its id, group, task score and task):
    {episode: buffered success} for the last episode of each group whose episodes' task scores all failed.

    Works for both row layouts: an episode is one row (`cua.env.rows=episode`) or one row per step (`step`). The
    trigger reads task scores, as ARPO does, not the reward, so an invalid-action penalty cannot hide a failure."""
    if not len(episodes) == len(groups) == len(scores) == len(tasks):
        raise ValueError(
            f"lengths differ: episodes {len(episodes)}, groups {len(groups)}, scores {len(scores)}, tasks {len(tasks)}"
        )
    first: dict[Hashable, int] = {}
    for i, ep in enumerate(episodes):
        first.setdefault(ep, i)
    order = list(first)
    picked = replay_targets(
        [groups[first[ep]] for ep in order],
        [scores[first[ep]] for ep in order],
        [tasks[first[ep]] for ep in order],
        buffer,
        rng,
        std_threshold=std_threshold,
        mean_threshold=mean_threshold,
    )
    return {order[k]: item for k, item in picked.items()}


def replay_keys(victim_keys: Sequence[str], steps: int) -> tuple[list[str], list[str]]:
    """Keys for a replayed trajectory of `steps` rows taking the place of an episode whose rows have `victim_keys`
    (verl's `{uid}_{session}_{index}`): the rows' keys in step order (the victim's first, then new indices), and
    the victim's keys left over (to be removed)."""
    if not victim_keys or steps < 1:
        raise ValueError(f"need victim keys and steps >= 1, got {len(victim_keys)} keys and {steps} steps")
    ordered = sorted(victim_keys, key=lambda k: int(k.rsplit("_", 1)[1]))
    prefix = ordered[0].rsplit("_", 1)[0]
    if any(k.rsplit("_", 1)[0] != prefix for k in ordered):
        raise ValueError(f"victim rows come from more than one session: {ordered}")
    taken = {int(k.rsplit("_", 1)[1]) for k in ordered}
    keys = ordered[:steps]
    nxt = max(taken) + 1
    while len(keys) < steps:
        keys.append(f"{prefix}_{nxt}")
        nxt += 1
    return keys, ordered[steps:]
