"""GiGPO: episode-level plus anchor-state step-level group advantages (pure Python, no torch)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Sequence

NORMS = ("mean", "std")
_EPS = 1e-6


def step_returns(step_rewards: Sequence[float], gamma: float) -> list[float]:
    """Discounted returns R_t = sum_k gamma^k r_{t+k}."""
    out = [0.0] * len(step_rewards)
    running = 0.0
    for t in range(len(step_rewards) - 1, -1, -1):
        running = float(step_rewards[t]) + gamma * running
        out[t] = running
    return out


def _relative(values: list[float], norm: str) -> list[float]:
    """Group-relative values: x - mean, divided by (unbiased std + eps) for norm "std"; a singleton gives 0."""
    if len(values) < 2:
        return [0.0] * len(values)
    mean = sum(values) / len(values)
    centered = [v - mean for v in values]
    if norm == "mean":
        return centered
    std = math.sqrt(sum(c * c for c in centered) / (len(values) - 1))
    return [c / (std + _EPS) for c in centered]


def gigpo_advantages(
    episode_rewards: Sequence[float],
    groups: Sequence[Hashable],
    step_anchors: Sequence[Sequence[Hashable]],
    step_rewards: Sequence[Sequence[float]] | None = None,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    norm: str = "mean",
) -> tuple[list[float], list[list[float]], dict[str, float]]:
    """Episode advantages, per-step A^E + step_weight * A^S (anchor-state groups within each episode group), metrics."""
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; valid: {', '.join(NORMS)}")
    n = len(episode_rewards)
    if len(groups) != n or len(step_anchors) != n:
        raise ValueError(f"lengths differ: rewards {n}, groups {len(groups)}, step_anchors {len(step_anchors)}")
    if step_rewards is None:
        pairs = zip(step_anchors, episode_rewards, strict=True)
        step_rewards = [[0.0] * (len(a) - 1) + [float(r)] if a else [] for a, r in pairs]
    if len(step_rewards) != n or any(len(r) != len(a) for r, a in zip(step_rewards, step_anchors, strict=True)):
        raise ValueError("step_rewards must give one reward per step of every episode")

    episode_rows: dict[Hashable, list[int]] = {}
    for i, group in enumerate(groups):
        episode_rows.setdefault(group, []).append(i)
    episode_adv = [0.0] * n
    for rows in episode_rows.values():
        for i, adv in zip(rows, _relative([float(episode_rewards[i]) for i in rows], norm), strict=True):
            episode_adv[i] = adv

    returns = [step_returns(r, gamma) for r in step_rewards]
    step_adv = [[0.0] * len(a) for a in step_anchors]
    anchor_steps: dict[tuple[Hashable, Hashable], list[tuple[int, int]]] = {}
    for i, anchors in enumerate(step_anchors):
        for t, anchor in enumerate(anchors):
            anchor_steps.setdefault((groups[i], anchor), []).append((i, t))
    sizes = []
    singletons = 0
    for steps in anchor_steps.values():
        if len(steps) < 2:
            singletons += 1
            continue
        sizes.append(len(steps))
        for (i, t), adv in zip(steps, _relative([returns[i][t] for i, t in steps], norm), strict=True):
            step_adv[i][t] = adv

    combined = [[episode_adv[i] + step_weight * a for a in step_adv[i]] for i in range(n)]
    metrics = {
        "gigpo/step_groups": float(len(sizes)),
        "gigpo/step_group_size_mean": float(sum(sizes) / len(sizes)) if sizes else 0.0,
        "gigpo/singleton_steps": float(singletons),
    }
    return episode_adv, combined, metrics


def screenshot_anchor(png_or_bytes: bytes) -> str:
    """Anchor of a screenshot: the sha1 hex digest of its bytes."""
    return hashlib.sha1(bytes(png_or_bytes)).hexdigest()


def text_anchor(text: str) -> str:
    """Anchor of a text observation (e.g. an accessibility tree): sha1 of its whitespace-normalized text."""
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()


# The `screen` anchor's thumbnail: 64 x 36 box-averaged cells, 8 gray levels. On the local OSWorld desktop
# (`python -m bench.gigpo_anchors`, 4 tasks x 4 episodes, the pointer moved between steps) it put 80 of 91 pairs of
# same-state steps together and merged 15 of 367 pairs of different states; exact pixels: 0 of 91 (every step a
# singleton); 16 x 9 at 4 levels: 91 of 91 but 367 of 367 merged.
SCREEN_GRID = (64, 36)
SCREEN_LEVELS = 8


def screen_anchor(gray: bytes, size: tuple[int, int] = SCREEN_GRID, levels: int = SCREEN_LEVELS) -> str:
    """Anchor of a screen robust to volatile pixels: sha1 of a coarse grayscale thumbnail (`gray`: row-major 8-bit
    pixels of `size` = (width, height), box-averaged cells) quantised to `levels` levels, so a pointer, a clock or
    anti-aliasing that moves a cell's mean by less than a level rarely splits a step group."""
    if levels < 2 or levels > 256:
        raise ValueError(f"levels must be in [2, 256], got {levels}")
    width, height = size
    if len(gray) != width * height:
        raise ValueError(f"{len(gray)} pixels for a {width}x{height} thumbnail")
    step = 256 / levels
    quantised = bytes(int(v // step) for v in gray)
    return hashlib.sha1(quantised + f"{width}x{height}/{levels}".encode()).hexdigest()


def step_rewards_with_penalties(
    score: float, invalid: Sequence[bool], penalty: float, steps: int | None = None
) -> list[float]:
    """Per-step rewards of an episode as verl-agent assigns them: each invalid action costs `penalty` at its own
    step, and the task score arrives at the last step (they sum to the episode's reward)."""
    n = len(invalid) if steps is None else steps
    if n == 0:
        return []
    flags = list(invalid)[:n] + [False] * max(0, n - len(invalid))
    rewards = [-penalty * float(bad) for bad in flags]
    rewards[-1] += float(score)
    return rewards
