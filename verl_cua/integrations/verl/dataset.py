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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verl_cua.envs import ENV_REGISTRY, EnvUsageError, env_spec
from verl_cua.envs.task_sets import TaskRef, resolve_tasks, unique_refs

HOSTS = ("verl", "verl-agent")


def task_rows(
    env: str,
    tasks: list[str],
    seeds: str = "0",
    host: str = "verl",
    *,
    strict: bool = False,
    report: Callable[[str], Any] = print,
) -> list[dict[str, Any]]:
    """Rows for `env`'s tasks: MiniWoB++ names (checked against the installed miniwob package) under `seeds`
    (`0-9`, `1,2`), or OSWorld task JSON files, folders or meta files. OSWorld's are checked against this install
    (`task_check`): a task desktop-env cannot load or that needs a missing evaluator package is dropped, its line
    given to `report`, or, `strict`, refused."""
    if env != "osworld":
        return [_row(ref, host) for ref in resolve_tasks(env, tasks, seeds)]
    from verl_cua.envs.osworld.task_check import check_task_set

    check = check_task_set([t.strip() for t in tasks if t.strip()])
    if check.dropped:
        lines = check.lines()
        if strict:
            raise EnvUsageError("\n".join([lines[0] + " (--strict: refused)", *lines[1:]]))
        for line in [lines[0] + "; the others are dropped:", *lines[1:]]:
            report(line)
    if not check.refs:
        raise EnvUsageError(f"no runnable OSWorld task in {','.join(tasks)}")
    return [_row(ref, host) for ref in unique_refs(check.refs)]


def _row(ref: TaskRef, host: str) -> dict[str, Any]:
    """One row; for verl-agent also `env_kwargs`, which its collector passes to `GUIEnvironmentManager.reset`."""
    seeded = env_spec(ref.env).seeded_tasks  # MiniWoB++: a task name and a seed; OSWorld: a task config
    task, seed = (ref.task["task"], ref.task["seed"]) if seeded else (ref.task, None)
    task_id = task if seeded else ref.task_id
    row = {
        "data_source": f"verl_cua/{ref.env}",
        "prompt": [{"role": "user", "content": task_id}],
        "agent_name": "gui_agent",
        "ability": "computer_use",
        "extra_info": {"env": ref.env, "task": task, "seed": -1 if seed is None else int(seed), "task_id": task_id},
    }
    if host == "verl-agent":
        encoded = json.dumps(ref.task) if isinstance(ref.task, dict) else ref.task
        row["env_kwargs"] = {"task": encoded, "domain": ref.domain, "task_id": ref.task_id}
    return row


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
    ap.add_argument("--env", required=True, choices=ENV_REGISTRY.valid())
    ap.add_argument("--tasks", required=True, help="MiniWoB names (comma-separated) or OSWorld JSON files/folders")
    ap.add_argument("--seeds", default="0", help="MiniWoB seeds: 0-9 or 1,2,3 (or name@seed in --tasks)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--host", default="verl", choices=HOSTS, help="verl-agent: add the env_kwargs column it reads")
    ap.add_argument("--strict", action="store_true", help="OSWorld: refuse a task set with tasks this install "
                    "cannot run (desktop-env cannot load them, or an evaluator package is missing) instead of "
                    "dropping and listing them")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        rows = task_rows(args.env, args.tasks.split(","), args.seeds, args.host, strict=args.strict,
                         report=lambda line: print(f"verl-cua dataset: {line}", file=sys.stderr))  # fmt: skip
    except (ValueError, ImportError) as exc:  # ImportError: OSWorld's client missing, named with its install
        print(f"verl-cua dataset: {exc}", file=sys.stderr)
        return 2
    path = write_parquet(rows, args.out)
    print(json.dumps({"rows": len(rows), "out": str(path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
