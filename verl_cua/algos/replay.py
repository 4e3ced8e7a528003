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
    """{row: buffered success} for the last row of each all-fail group (population std and mean under thresholds)."""
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
