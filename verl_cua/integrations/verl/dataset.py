"""Write verl's parquet rows for GUI tasks: `python -m verl_cua.integrations.verl.dataset --env miniwob ...`.

One row per (task, seed): `prompt` (the task id; the real instruction comes from the env at reset),
`agent_name=gui_agent`, `data_source=verl_cua/<env>`, `extra_info={task, seed, index, env}`.
`--host verl-agent` adds `env_kwargs={task, domain, task_id}`, which verl-agent hands to the env manager's
`reset` (the rows then fix the task order, epochs and resumption, as verl-agent's Search env does).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from verl_cua.envs.task_sets import resolve_tasks

ENVS = ("miniwob", "osworld")
HOSTS = ("verl", "verl-agent")


def miniwob_rows(tasks: list[str], seeds: str) -> list[dict[str, Any]]:
    """Rows for MiniWoB++ task names (checked against the installed miniwob package) and seeds (`0-9`, `1,2`)."""
    return [_row("miniwob", ref.task["task"], ref.task["seed"]) for ref in resolve_tasks("miniwob", tasks, seeds)]


def osworld_rows(paths: list[str]) -> list[dict[str, Any]]:
    """Rows for OSWorld task JSON files, folders or meta files (each validated as OSWorld would load it)."""
    return [_row("osworld", ref.task, None, task_id=ref.task_id) for ref in resolve_tasks("osworld", paths)]


def _row(env: str, task: str, seed: int | None, task_id: str | None = None) -> dict[str, Any]:
    return {
        "data_source": f"verl_cua/{env}",
        "prompt": [{"role": "user", "content": task_id or task}],
        "agent_name": "gui_agent",
        "ability": "computer_use",
        "extra_info": {"env": env, "task": task, "seed": -1 if seed is None else int(seed), "task_id": task_id or task},
    }


def for_verl_agent(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same rows with the `env_kwargs` column verl-agent's collector passes to `GUIEnvironmentManager.reset`."""
    for row in rows:
        info = row["extra_info"]
        task = {"task": info["task"], "seed": info["seed"]} if info["env"] == "miniwob" else info["task"]
        domain = info["task"] if info["env"] == "miniwob" else Path(info["task"]).parent.name
        task_id = f"seed-{info['seed']}" if info["env"] == "miniwob" else info["task_id"]
        row["env_kwargs"] = {
            "task": json.dumps(task) if isinstance(task, dict) else task,
            "domain": domain,
            "task_id": task_id,
        }
    return rows


def write_parquet(rows: list[dict[str, Any]], out: str | Path) -> Path:
    """Number the rows (`extra_info.index`) and write them as parquet."""
    import pandas as pd

    for i, row in enumerate(rows):
        row["extra_info"]["index"] = i
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", required=True, choices=ENVS)
    ap.add_argument("--tasks", required=True, help="MiniWoB names (comma-separated) or OSWorld JSON files/folders")
    ap.add_argument("--seeds", default="0", help="MiniWoB seeds: 0-9 or 1,2,3 (or name@seed in --tasks)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--host", default="verl", choices=HOSTS, help="verl-agent: add the env_kwargs column it reads")
    args = ap.parse_args(argv)
    try:
        if args.env == "miniwob":
            rows = miniwob_rows(args.tasks.split(","), args.seeds)
        else:
            rows = osworld_rows(args.tasks.split(","))
    except ValueError as exc:
        print(f"verl-cua dataset: {exc}", file=sys.stderr)
        return 2
    if args.host == "verl-agent":
        rows = for_verl_agent(rows)
    path = write_parquet(rows, args.out)
    print(json.dumps({"rows": len(rows), "out": str(path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
