"""`summary.json` of an eval run, overall and per domain (OSWorld app / MiniWoB task), and its printed table.

Success rate = successes / scored episodes: an infra failure is not the model's, so it is counted apart
(`infra_failures`) and left out of the rate, as are tasks not run yet (`unfinished`). `success_rate_ci95` is the
Wilson score interval; `success_rate_osworld` counts infra failures as failures, as OSWorld's own scripts do.
Planner runs (`--planner`) add the executor's counts: `executor_calls`, `executor_failures` (infra),
`executor_rejected` (the planner's invalid steps) and `planner_answers` (`ANS`, no executor call).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from verl_cua.envs.trajectory import episode_dirs, read_result


def summarise(run_dir: str | Path, tasks: list[str] | None = None) -> dict[str, Any]:
    """Figures over the episodes of `tasks` (default: every episode in the run directory)."""
    root = Path(run_dir)
    keys = tasks if tasks is not None else list(episode_dirs(root))
    results = {}
    for key in keys:  # result.json only: the trajectories (raw replies included) are not needed here
        results[key] = _result(root / key) or {"status": "unfinished", "task": key}
    domains: dict[str, list[dict]] = {}
    for key, r in results.items():
        domains.setdefault(r.get("domain") or key.split("/")[0], []).append(r)
    return {
        **_figures(list(results.values())),
        "domains": {d: _figures(rs) for d, rs in sorted(domains.items())},
        "results": {
            k: {f: r.get(f) for f in ("status", "score", "steps", "end_reason", "attempts")} for k, r in results.items()
        },
    }


def _result(episode_dir: Path) -> dict[str, Any] | None:
    """The episode's result, or None (unfinished) when it has none or one that is not a JSON object."""
    try:
        result = read_result(episode_dir)
    except (OSError, ValueError):  # not written by write_json's atomic rename (it leaves a whole file or none)
        return None
    return result if isinstance(result, dict) else None


def _figures(results: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in results if r["status"] in ("success", "failure")]
    infra = sum(r["status"] == "infra_failure" for r in results)
    successes = sum(r["status"] == "success" for r in scored)
    steps = sum(int(r.get("steps") or 0) for r in scored)
    invalid = sum(int(r.get("invalid_actions") or 0) for r in scored)
    usage = [r.get("usage_all_attempts") or r.get("usage") or {} for r in results]  # spend includes failed tries
    figures = {
        "tasks": len(results),
        "scored": len(scored),
        "successes": successes,
        "success_rate": successes / len(scored) if scored else None,
        "success_rate_ci95": wilson_interval(successes, len(scored)),
        "success_rate_osworld": successes / (len(scored) + infra) if scored or infra else None,
        "infra_failures": infra,
        "unfinished": sum(r["status"] == "unfinished" for r in results),
        "retried": sum(int(r.get("attempts") or 1) > 1 for r in results),
        "invalid_action_rate": invalid / steps if steps else None,
        "mean_steps": steps / len(scored) if scored else None,
        "mean_step_latency_s": sum(float(r.get("model_seconds") or 0) for r in scored) / steps if steps else None,
        "mean_env_s_per_step": sum(float(r.get("env_seconds") or 0) for r in scored) / steps if steps else None,
        "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
        "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
    }
    return {**figures, **_executor_figures(results)}


def _executor_figures(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Planner runs (`--planner`): the executor's calls, its failures (infra) and rejections (the planner's invalid
    steps), and the planner's answers that skipped it, over every attempt; nothing for other runs."""
    planned = [r.get("executor_all_attempts") or r for r in results if "executor_calls" in r]
    if not planned:
        return {}
    keys = ("executor_calls", "executor_failures", "executor_rejected", "planner_answers")
    return {key: sum(int(r.get(key) or 0) for r in planned) for key in keys}


def wilson_interval(successes: int, n: int, z: float = 1.96) -> list[float] | None:
    """The Wilson score interval of a success rate (95% by default); None without trials."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def wide_console():
    """A rich console; 160 columns when writing to a log file or a pipe (no 80-column squeeze of the tables)."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def print_summary(summary: dict[str, Any], title: str = "verl-cua eval") -> None:
    """A rich table: one row per domain and one for the whole run."""
    from rich.table import Table

    table = Table(title=title)
    columns = (
        "domain",
        "tasks",
        "success",
        "rate",
        "95% CI",
        "infra",
        "invalid",
        "steps",
        "s/step",
        "tokens in",
        "out",
    )
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
    rows = list(summary["domains"].items())
    for name, figures in rows:
        table.add_row(name, *_cells(figures))
    table.add_section()
    table.add_row("[bold]all", *_cells(summary), style="bold")
    console = wide_console()
    console.print(table)
    if "executor_calls" in summary:
        console.print(
            f"executor: {summary['executor_calls']} calls, {summary['executor_failures']} failed (infra), "
            f"{summary['executor_rejected']} rejected (the planner's invalid steps); "
            f"{summary['planner_answers']} planner answers without a call"
        )


def _cells(f: dict[str, Any]) -> list[str]:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    def num(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    unfinished = f" (+{f['unfinished']} left)" if f["unfinished"] else ""
    return [
        f"{f['tasks']}{unfinished}",
        f"{f['successes']}/{f['scored']}",
        pct(f["success_rate"]),
        "-" if f["success_rate_ci95"] is None else "{:.0f}-{:.0f}%".format(*(100 * v for v in f["success_rate_ci95"])),
        str(f["infra_failures"]),
        pct(f["invalid_action_rate"]),
        num(f["mean_steps"], ".1f"),
        num(f["mean_step_latency_s"], ".2f"),
        _count(f["prompt_tokens"]),
        _count(f["completion_tokens"]),
    ]


def _count(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)
