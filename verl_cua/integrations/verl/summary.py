"""Summarise a training run from verl's file logger (JSONL): a rich table and a JSON file.

`python -m verl_cua.integrations.verl.summary metrics.jsonl --seconds S --out summary.json [--eval NAME=RUN ...]
[--blind TASKS:TRAIN_SEEDS:HELDOUT_SEEDS]`

Beside the per-step figures: success over the first and the last `window` steps (the curve's rise), and, with
`--eval`, the success rate of `verl-cua eval` runs (e.g. the initial and the trained model on held-out tasks) and,
for single-target MiniWoB++ tasks, each run's grounding gap beside it (`verl_cua.eval.grounding`: held-out success
without a positive gap is a learned prior, not looking); with `--blind`, the screen-blind baseline (`blind`: the
best single click point on the training layouts, scored on the held-out ones), the bar looking must clear.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from verl_cua.envs.trajectory import write_atomic
from verl_cua.eval.blind_baseline import blind_baseline
from verl_cua.eval.grounding import describe, run_grounding
from verl_cua.metrics_log import read_records

# summary key -> the verl / verl-cua metric it reads, per step
PER_STEP = {
    "step": "step",  # verl's global step (a run resumed from a checkpoint need not start at 1)
    "reward_mean": "critic/rewards/mean",
    "success_rate": "cua/success_rate",
    "invalid_action_rate": "cua/invalid_action_rate",
    "infra_failures": "cua/infra_failures",
    "steps_per_episode": "cua/steps_mean",
    "seconds_step": "timing_s/step",
    "seconds_rollout": "timing_s/gen",
    "seconds_old_log_prob": "timing_s/old_log_prob",
    "seconds_update_actor": "timing_s/update_actor",
    "seconds_update_weights": "timing_s/update_weights",
    "env_seconds_per_episode": "cua/env_seconds_mean",
    "generate_seconds_per_episode": "cua/generate_seconds_mean",
}


def read_steps(path: str | Path) -> list[dict[str, Any]]:
    """The per-step metric dicts of verl's file logger, each step once and in step order (validation-only steps
    skipped; a cut last line or a resumed run's repeated steps handled by `verl_cua.metrics_log`)."""
    return [
        {"step": r["step"], **r["data"]}
        for r in read_records(path)
        if "cua/episodes" in r["data"] or "critic/rewards/mean" in r["data"]
    ]


WINDOW = 5  # steps averaged at each end of the curve (fewer on short runs: at most half the steps)


def summarise(steps: list[dict[str, Any]], seconds: float, evals: dict[str, dict] | None = None) -> dict[str, Any]:
    """The summary: last-step headline figures, the first and last window's success, per-step lists of each figure,
    and the success rate of each `evals` run (name -> its summary.json)."""
    per_step = {key: [s.get(metric) for s in steps] for key, metric in PER_STEP.items()}
    last = steps[-1] if steps else {}
    window = max(1, min(WINDOW, len(steps) // 2))
    success = [x for x in per_step["success_rate"] if x is not None]
    return {
        "steps": len(steps),
        "reward_mean": last.get(PER_STEP["reward_mean"]),
        "success_rate": last.get(PER_STEP["success_rate"]),
        "invalid_action_rate": last.get(PER_STEP["invalid_action_rate"]),
        "infra_failures": int(sum(x or 0 for x in per_step["infra_failures"])),
        "seconds": seconds,
        "window": window,
        "first_window_success": _mean(success[:window]),
        "last_window_success": _mean(success[-window:]),
        "eval": {name: _eval_figures(run) for name, run in (evals or {}).items()},
        "per_step": per_step,
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _eval_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The headline of a `verl-cua eval` summary.json."""
    keys = ("success_rate", "success_rate_ci95", "scored", "successes", "infra_failures", "invalid_action_rate")
    return {key: summary.get(key) for key in (*keys, "grounding")}


def print_summary(summary: dict[str, Any], where: str) -> None:
    """A rich table of the per-step figures and where the logs are."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"verl-cua run: {summary['steps']} steps in {summary['seconds']:.0f} s")
    cols = {
        "reward_mean": "reward",
        "success_rate": "success",
        "invalid_action_rate": "invalid",
        "infra_failures": "infra",
        "seconds_step": "step s",
        "seconds_rollout": "rollout s",
        "seconds_update_actor": "update s",
    }
    table.add_column("step", justify="right")
    for label in cols.values():
        table.add_column(label, justify="right")
    for i in range(summary["steps"]):
        step = summary["per_step"].get("step", [None] * summary["steps"])[i]
        cells = [_fmt(summary["per_step"][c][i]) for c in cols]  # keys of `cols`
        table.add_row(str(step if step is not None else i + 1), *cells)
    console = Console()
    console.print(table)
    if summary.get("first_window_success") is not None:
        console.print(
            f"success over the first {summary['window']} steps: {summary['first_window_success']:.3f}; "
            f"over the last {summary['window']}: {summary['last_window_success']:.3f}"
        )
    blind = summary.get("blind")
    if blind:
        console.print(
            f"blind baseline (one click at {tuple(blind['point'])} on every layout, never looking): "
            f"{blind['heldout_rate']:.3f} of the held-out layouts; uniform random clicks: {blind['uniform_rate']:.3f}"
        )
    for name, figures in summary.get("eval", {}).items():
        low, high = figures.get("success_rate_ci95") or (None, None)
        ci = f" (95% CI {low:.2f}-{high:.2f})" if low is not None else ""
        console.print(f"{name}: success {figures['successes']}/{figures['scored']} = {figures['success_rate']:.3f}{ci}")
        for task, gap in (figures.get("grounding") or {}).items():
            console.print(f"  {task}: {describe(gap)}")
    console.print(f"metrics: {where}")


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics")
    ap.add_argument("--seconds", type=float, default=0.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--eval", action="append", default=[], metavar="NAME=RUN", help="a verl-cua eval run to report")
    ap.add_argument(
        "--blind",
        metavar="TASKS:TRAIN_SEEDS:HELDOUT_SEEDS",
        help="add the screen-blind baseline of these single-click MiniWoB++ tasks (verl_cua.eval.blind_baseline)",
    )
    args = ap.parse_args(argv)
    blind_spec = args.blind.split(":") if args.blind else None
    if blind_spec is not None and (len(blind_spec) != 3 or not all(blind_spec)):
        print(f"verl-cua summary: --blind wants TASKS:TRAIN_SEEDS:HELDOUT_SEEDS, got {args.blind!r}", file=sys.stderr)
        return 2
    steps = read_steps(args.metrics)
    if not steps:
        print(f"verl-cua summary: no training steps in {args.metrics}", file=sys.stderr)
        return 1
    evals, boxes = {}, {}
    for item in args.eval:
        name, sep, run = item.partition("=")
        path = Path(run) / "summary.json"
        if not sep or not path.is_file():
            print(f"verl-cua summary: --eval wants NAME=RUN with RUN/summary.json, got {item!r}", file=sys.stderr)
            return 2
        evals[name] = {**json.loads(path.read_text()), "grounding": run_grounding(run, boxes)}
    summary = summarise(steps, args.seconds, evals)
    if blind_spec is not None:
        tasks, train, heldout = blind_spec
        summary["blind"] = blind_baseline(tuple(tasks.split(",")), train, heldout)
    write_atomic(Path(args.out), json.dumps(summary, indent=2).encode())
    print_summary(summary, f"{args.metrics} (summary: {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
