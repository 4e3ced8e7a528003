"""Success curves: the drawing `bench.learn`'s learn.png and the quickstart's curve.png share, and the quickstart's
curve itself: `python -m bench.curve OUT/summary.json [--metrics OUT/train/metrics.jsonl] [--out OUT/curve.png]`.

The curve of one run is drawn from its summary.json (`verl_cua.integrations.verl.summary`): the success of every
training step, their trailing mean over the summary's window (5 steps), the held-out success of each evaluated model
(`eval`: the quickstart's initial and trained model) as a horizontal mark, and the screen-blind baseline when the
summary has one (`blind`: the best single click point, `verl_cua.eval.blind_baseline`). `--metrics` (verl's
metrics.jsonl) adds the episodes per step as a second axis. Without matplotlib (the `bench` extra) it draws
nothing, says so in one line and exits 0: the figures stay in summary.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.requires import missing_line

WINDOW = 5  # steps of the trailing mean (the summary's and bench.learn's windows)
EVAL_STYLES = {"initial": ("tab:gray", ":"), "trained": ("tab:green", "-.")}  # other names get matplotlib's colours


def trailing_mean(curve: list[float], window: int = WINDOW) -> list[float]:
    """The mean of each point and the `window` - 1 before it (fewer at the start)."""
    return [statistics.fmean(curve[max(0, i + 1 - window) : i + 1]) for i in range(len(curve))]


def success_axes(episodes_per_step: int | None, ylabel: str):
    """A figure with a success axis (0-1) over training steps, and episodes on top when `episodes_per_step` is known."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    each = f" ({episodes_per_step} episodes each)" if episodes_per_step else ""
    ax.set_xlabel(f"training step{each}")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    if episodes_per_step:
        n = episodes_per_step
        ax.secondary_xaxis("top", functions=(lambda s: s * n, lambda e: e / n)).set_xlabel("episodes")
    return fig, ax


def mark_blind(ax, rate: float) -> None:
    """The screen-blind baseline on the held-out layouts: a dashed line."""
    ax.axhline(rate, linestyle="--", color="gray", label=f"blind baseline, held-out (never looks): {rate:.2f}")


def save(fig, ax, path: str | Path) -> None:
    """Legend, layout, PNG at `path`; the figure is closed."""
    import matplotlib.pyplot as plt

    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def gap_label(figures: dict[str, Any]) -> str:
    """`, gap +0.01 [-0.05, +0.08]`: the grounding gap of a one-task eval's held-out success, or nothing."""
    gaps = list((figures.get("grounding") or {}).values())
    if len(gaps) != 1 or gaps[0].get("gap") is None:
        return ""
    gap = gaps[0]
    return f", grounding gap {gap['gap']:+.2f} [{gap['gap_low']:+.2f}, {gap['gap_high']:+.2f}]"


def run_series(summary: dict[str, Any]) -> dict[str, Any]:
    """What curve.png shows of a summary.json: the steps with a success rate, those rates, their trailing mean over
    the summary's window, one (label, rate, name) mark per evaluated model, and the blind baseline or None."""
    per_step = summary.get("per_step") or {}
    rates = per_step.get("success_rate") or []
    numbers = per_step.get("step") or [None] * len(rates)
    points = [(n if n is not None else i + 1, r) for i, (n, r) in enumerate(zip(numbers, rates, strict=False))]
    points = [(n, r) for n, r in points if r is not None]
    window = int(summary.get("window") or WINDOW)
    values = [r for _, r in points]
    marks = []
    for name, figures in (summary.get("eval") or {}).items():
        rate = (figures or {}).get("success_rate")
        if rate is not None:
            counts = f" ({figures['successes']}/{figures['scored']})" if figures.get("scored") else ""
            marks.append((f"{name} model, held-out: {rate:.2f}{counts}{gap_label(figures)}", float(rate), name))
    blind = summary.get("blind")
    if isinstance(blind, dict):
        blind = blind.get("heldout_rate")
    return {
        "steps": [n for n, _ in points],
        "success": values,
        "window": window,
        "mean": trailing_mean(values, window),
        "marks": marks,
        "blind": float(blind) if isinstance(blind, int | float) else None,
    }


def draw_run(summary: dict[str, Any], path: str | Path, episodes_per_step: int | None = None) -> None:
    """curve.png of one run from its summary.json: per-step success, its trailing mean, held-out and blind marks."""
    series = run_series(summary)
    fig, ax = success_axes(episodes_per_step, "success rate")
    if series["steps"]:
        ax.plot(series["steps"], series["success"], marker="o", markersize=3, linewidth=0.8, alpha=0.45,
                color="tab:blue", label="success per step")  # fmt: skip
        ax.plot(series["steps"], series["mean"], linewidth=2, color="tab:blue",
                label=f"trailing mean of {series['window']} steps")  # fmt: skip
    for label, rate, name in series["marks"]:
        color, style = EVAL_STYLES.get(name, (None, ":"))
        ax.axhline(rate, color=color, linestyle=style, label=label)
    if series["blind"] is not None:
        mark_blind(ax, series["blind"])
    ax.set_title(f"success per training step ({len(series['steps'])} steps)")
    save(fig, ax, path)


def episodes_per_step(metrics: str | Path) -> int | None:
    """The median `cua/episodes` of a run's training steps (verl's metrics.jsonl), or None when none has it."""
    from verl_cua.metrics_log import training_steps

    counts = [s["cua/episodes"] for s in training_steps(metrics, "cua/episodes")]
    return round(statistics.median(counts)) if counts else None


def main(argv: list[str] | None = None) -> int:
    """CLI: draw OUT/curve.png beside a run's summary.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("summary", help="a run's summary.json (python -m verl_cua.integrations.verl.summary)")
    ap.add_argument("--metrics", default=None, help="the run's metrics.jsonl: episodes per step on a second axis")
    ap.add_argument("--out", default=None, help="the PNG (default: curve.png beside the summary)")
    args = ap.parse_args(argv)
    source = Path(args.summary)
    try:
        summary = json.loads(source.read_text())
    except (OSError, ValueError) as exc:
        print(f"bench.curve: cannot read {source}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(summary, dict) or not isinstance(summary.get("per_step"), dict):
        print(f"bench.curve: {source} is not a run's summary.json (no per_step)", file=sys.stderr)
        return 2
    line = missing_line(("matplotlib",))
    if line is not None:
        print(f"bench.curve: no curve drawn (the figures stay in {source}): {line}", file=sys.stderr)
        return 0
    out = Path(args.out) if args.out else source.with_name("curve.png")
    metrics = Path(args.metrics) if args.metrics else None
    draw_run(summary, out, episodes_per_step(metrics) if metrics and metrics.is_file() else None)
    print(f"bench.curve: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
