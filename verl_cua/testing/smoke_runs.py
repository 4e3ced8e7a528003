"""`python -m verl_cua.testing.smoke_runs OUT --steps N`: did every `recipes/gpu_smoke.sh` run log N training steps?
One line per run (steps, seconds a step, rewards, invalid-action rate), exit 1 when one did not."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verl_cua.metrics_log import training_steps


def check_runs(out: Path, steps: int) -> list[tuple[str, bool, str]]:
    """(run, ok, summary) for every `<estimator>_lora<rank>.jsonl` in `out`."""
    results = []
    for log in sorted(out.glob("*_lora*.jsonl")):
        trained = training_steps(log, "timing_s/step")  # each step once, a cut last line skipped
        ok = len(trained) >= steps
        seconds = [round(float(d["timing_s/step"]), 1) for d in trained]
        rewards = [round(float(d.get("critic/rewards/mean", float("nan"))), 3) for d in trained]
        results.append((log.stem, ok, f"{len(trained)}/{steps} steps, s/step {seconds}, reward {rewards}"))
    return results


def main(argv: list[str] | None = None) -> int:
    """Print one line per run; 1 when a run logged fewer steps than asked or no run is there."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args(argv)
    results = check_runs(args.out, args.steps)
    for name, ok, summary in results:
        print(f"{'ok' if ok else 'FAIL':<4}  {name}: {summary}")
    if not results:
        print(f"FAIL  no runs in {args.out}")
    return 0 if results and all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
