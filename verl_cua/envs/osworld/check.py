"""`check_client()`: the osworld env's Python side is importable (run by envs/osworld/install.sh)."""

from __future__ import annotations


def check_client() -> None:
    """Import DesktopEnv through the lazy evaluators and every metric/getter our task set uses; raise on failure."""
    from verl_cua.envs.osworld import evaluators
    from verl_cua.envs.osworld.tasks import TASK_ROOT, load_task, task_names

    evaluators.install()
    from desktop_env.desktop_env import DesktopEnv  # noqa: F401

    for name in task_names(TASK_ROOT):
        task, _ = load_task(name)
        for fn, kind in used_evaluators(task):
            resolved = evaluators.metric(fn) if kind == "metric" else evaluators.getter(fn)
            message = evaluators.missing_dependency(resolved)
            if message:
                raise ImportError(f"task {name}: {kind} {fn}: {message}")


def used_evaluators(task: dict) -> list[tuple[str, str]]:
    """(name, "metric"|"getter") pairs a task's evaluator names."""
    ev = task["evaluator"]
    funcs = ev["func"] if isinstance(ev["func"], list) else [ev["func"]]
    out = [(f, "metric") for f in funcs if f != "infeasible"]
    for key in ("result", "expected"):
        specs = ev.get(key, [])
        for spec in specs if isinstance(specs, list) else [specs]:
            if isinstance(spec, dict) and "type" in spec:
                out.append((spec["type"], "getter"))
    return out
