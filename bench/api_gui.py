"""GUI vs API-GUI on our office tasks: `python -m bench.api_gui [--tasks calc-sum-column,...] [--only gui|api]`.

For each LibreOffice task of our OSWorld set, on one local desktop: reset, then its scripted keyboard solution
(verl_cua.testing.osworld_solutions, pyautogui model outputs) or its scripted `api_gui` solution (one app-API call per
step, verl_cua.testing.osworld_api_solutions), then OSWorld's own evaluator. Reports success, steps and the seconds of
the steps (reset and evaluation excluded) per task and approach, prints a table and writes outputs/api_gui.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.requires import require

OFFICE_PREFIXES = ("calc-", "writer-", "impress-")


def _run(env, task: str, steps: list, api: bool) -> dict:
    env.reset(task)
    t = time.perf_counter()
    results = []
    for step in steps:
        result = env.step(step, format="api_gui" if api else "pyautogui")  # model text through its format's parser
        results.append(result.info.get("api_result") if api else None)
        if not result.info["action_valid"] or result.info["infra_failure"]:
            break
    seconds = time.perf_counter() - t
    score = env.evaluate()
    return {"success": score == 1.0, "score": score, "steps": len(steps), "seconds": round(seconds, 2),
            "api_results": results if api else None}  # fmt: skip


def office_tasks() -> list[str]:
    """Every office task with a scripted `api_gui` solution (each has a keyboard one too)."""
    from verl_cua.testing.osworld_api_solutions import API_SOLUTIONS

    return sorted(t for t in API_SOLUTIONS if t.startswith(OFFICE_PREFIXES))


def run_tasks(env, tasks: list[str], approaches: list[str]) -> list[dict]:
    """Each task on `env` by each approach (`gui`: its keyboard solution, `api`: its API one); a row per task."""
    from verl_cua.testing.osworld_api_solutions import API_SOLUTIONS
    from verl_cua.testing.osworld_solutions import SOLUTIONS

    rows = []
    for task in tasks:
        row = {"task": task}
        for approach in approaches:
            steps = SOLUTIONS[task] if approach == "gui" else API_SOLUTIONS[task]
            row[approach] = _run(env, task, steps, api=approach == "api")
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def summarise(rows: list[dict], approaches: list[str]) -> dict:
    """Per approach: tasks solved, steps per success (over the solved ones) and the steps' seconds in all."""
    summary = {}
    for a in approaches:
        ok = [r[a] for r in rows if r[a]["success"]]
        summary[a] = {
            "successes": len(ok), "tasks": len(rows),
            "steps_per_success": round(sum(r["steps"] for r in ok) / len(ok), 2) if ok else None,
            "seconds_total": round(sum(r[a]["seconds"] for r in rows), 2),
        }  # fmt: skip
    return summary


def main(argv: list[str] | None = None) -> int:
    """Run the office tasks by each approach on one local desktop; print the rows, the table and the summary, and
    write them as JSON (exit 2 on an unknown task, before any desktop starts)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="", help="comma-separated task ids (default: every office task)")
    ap.add_argument("--only", choices=("gui", "api"), default=None, help="run one approach only")
    ap.add_argument("--out", default="outputs/api_gui.json")
    args = ap.parse_args(argv)
    require("bench.api_gui", ("desktop_env",))

    from verl_cua.envs import make_env

    valid = office_tasks()
    tasks = [t for t in args.tasks.split(",") if t] or valid
    unknown = [t for t in tasks if t not in valid]
    if unknown:  # before any desktop starts
        print(f"bench.api_gui: unknown office task(s) {', '.join(unknown)}; valid: {', '.join(valid)}", file=sys.stderr)
        return 2
    approaches = [a for a in ("gui", "api") if args.only in (None, a)]
    env = make_env("osworld", provider="local", action_format="pyautogui")
    try:
        rows = run_tasks(env, tasks, approaches)
    finally:
        env.close()
    print(f"\n{'task':28} " + " ".join(f"{a + ' ok':>7} {a + ' steps':>9} {a + ' s':>7}" for a in approaches))
    for row in rows:
        cells = [f"{str(row[a]['success']):>7} {row[a]['steps']:>9} {row[a]['seconds']:>7.2f}" for a in approaches]
        print(f"{row['task']:28} " + " ".join(cells))
    summary = summarise(rows, approaches)
    for a, figures in summary.items():
        print(f"{a}: {figures['successes']}/{figures['tasks']} solved; steps per success "
              f"{figures['steps_per_success']}; {figures['seconds_total']} s of steps in all")  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
