"""The grounding gap: does a policy's held-out success come from looking at the screenshot, or from a prior?

On tasks whose instruction is the same for every layout (MiniWoB++ click-test), a policy that clicks where targets
usually are scores well without reading the screen. The gap separates the two: `own`, the share of a layout's own
clicks that hit its target, minus `cross`, the share of the clicks the policy made on *other* layouts that hit this
layout's target. A policy that never looks makes the same clicks everywhere, so its gap is 0 whatever its spread;
a positive gap (its bootstrap interval over layouts above 0) is evidence of looking. Held-out success without one
is the *learned prior* (docs/learning.md).

Clicks are in task-area pixels and a click hits a (left, top, right, bottom) box with right and bottom exclusive,
as MiniWoB++ scores a click at a pixel's centre. `run_grounding` reads an eval run (`verl-cua eval`) of a
single-target MiniWoB++ task; `bench.grounding` samples a model directly and adds the screenshot-swap check.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

Box = tuple[float, float, float, float]
Click = tuple[float, float] | None  # task-area pixels; None: no valid single click
MINIWOB_AREA = (160, 210)  # the task area; a click without coordinates clicks its centre (the episode's cursor)
RESAMPLES = 2000
SINGLE_TARGET_TASKS = ("click-test", "focus-text")  # tasks whose every layout has one target and one instruction


def hits(click: Click, box: Box) -> bool:
    """Whether `click` lands in `box` (left, top, right, bottom; right and bottom exclusive)."""
    return click is not None and box[0] <= click[0] < box[2] and box[1] <= click[1] < box[3]


def hit_matrix(clicks: list[list[Click]], boxes: list[Box]) -> np.ndarray:
    """H[i, j]: the share of layout j's clicks that hit layout i's target (the diagonal: own success)."""
    return np.array([[np.mean([hits(c, box) for c in mine]) if mine else 0.0 for mine in clicks] for box in boxes])


def own_cross(h: np.ndarray, index: np.ndarray | None = None) -> tuple[float, float]:
    """Own success (the diagonal) and cross success of the layouts `index` picks: per layout, the mean over the
    *other* layouts' clicks, then the mean over layouts (weighted as own is, so a blind policy's gap is 0 in every
    resample)."""
    index = np.arange(len(h)) if index is None else index
    sub = h[np.ix_(index, index)]
    distinct = index[:, None] != index[None, :]
    counts = distinct.sum(1)
    if not counts.any():
        return float(np.mean(np.diag(sub))), float("nan")
    return float(np.mean(np.diag(sub))), float(((sub * distinct).sum(1) / counts).mean())


def gap_interval(h: np.ndarray, resamples: int = RESAMPLES, level: float = 0.95, seed: int = 0) -> dict:
    """own, cross, gap = own - cross, and the gap's bootstrap interval (layouts resampled with replacement)."""
    own, cross = own_cross(h)
    rng = np.random.default_rng(seed)
    gaps = [np.subtract(*own_cross(h, rng.integers(0, len(h), len(h)))) for _ in range(resamples)]
    low, high = np.nanquantile(gaps, [(1 - level) / 2, (1 + level) / 2])
    return {
        "own": own,
        "cross": cross,
        "gap": own - cross,
        "gap_low": float(low),
        "gap_high": float(high),
        "layouts": len(h),
    }


def verdict(g: dict) -> str:
    """`looks` when the gap's interval lies above 0, `no success` when nothing hit, else `learned prior`."""
    if g["gap_low"] > 0:
        return "looks"
    return "no success" if g["own"] == 0 else "learned prior"


def describe(g: dict) -> str:
    """One line: the gap and its interval, own and cross (and the swap check when measured), and the verdict."""
    swap = f"; swapped observation {g['swap']:.3f} (drop {g['swap_drop']:+.3f})" if "swap" in g else ""
    return (
        f"grounding gap {g['gap']:+.3f} [{g['gap_low']:+.3f}, {g['gap_high']:+.3f}] (own {g['own']:.3f}, "
        f"cross {g['cross']:.3f}, {g['layouts']} layouts){swap}: {verdict(g)}"
    )


def run_clicks(run_dir: str | Path) -> dict[str, dict[int, list[Click]]]:
    """task -> seed -> the first-step clicks of an eval run's single-target MiniWoB++ episodes, in task-area pixels
    (None for a first step that is not one valid click)."""
    out: dict[str, dict[int, list[Click]]] = {}
    for path in sorted(Path(run_dir).glob("*/seed-*/trajectory.jsonl")):
        task, seed = path.parent.parent.name, int(path.parent.name.removeprefix("seed-"))
        if task not in SINGLE_TARGET_TASKS:
            continue
        lines = path.read_text().splitlines()
        out.setdefault(task, {}).setdefault(seed, []).append(_first_click(json.loads(lines[0])) if lines else None)
    return out


def area_point(x: float | None, y: float | None, scale: float) -> tuple[float, float]:
    """The task-area point MiniWoB++ clicks for screenshot pixel (x, y) (a pixel's centre); a click without
    coordinates clicks where a fresh episode's cursor is, the task area's centre."""
    if x is None or y is None:
        return MINIWOB_AREA[0] / 2, MINIWOB_AREA[1] / 2
    return (x + 0.5) / scale, (y + 0.5) / scale


def _first_click(step: dict) -> Click:
    actions = (step.get("action") or {}).get("actions") or []
    if not step.get("valid") or len(actions) != 1 or actions[0].get("kind") != "click":
        return None
    scale = (step.get("screen") or MINIWOB_AREA)[0] / MINIWOB_AREA[0]
    return area_point(actions[0].get("x"), actions[0].get("y"), scale)


def run_grounding(run_dir: str | Path, boxes_cache: dict | None = None) -> dict[str, dict]:
    """task -> the grounding gap of an eval run's single-target MiniWoB++ episodes (targets read from each layout's
    DOM in Chromium; `boxes_cache` keeps them for the next run of the same layouts). Empty for other runs."""
    from verl_cua.eval.blind_baseline import target_boxes

    cache = {} if boxes_cache is None else boxes_cache
    out = {}
    for task, by_seed in run_clicks(run_dir).items():
        seeds = sorted(by_seed)
        if len(seeds) < 2:
            continue
        missing = [s for s in seeds if (task, s) not in cache]
        if missing:
            boxes = target_boxes(task, ",".join(map(str, missing)))
            cache.update({(task, s): box for s, box in zip(missing, boxes, strict=True)})
        h = hit_matrix([by_seed[s] for s in seeds], [cache[task, s] for s in seeds])
        out[task] = gap_interval(h)
    return out
