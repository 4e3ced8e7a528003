"""OSWorld's `--tasks` items as `TaskRef`s (the env record's task resolver): task JSON files, folders of them (the
domain is the folder's name), OSWorld's meta files (`{"chrome": ["<id>", ...]}`, resolved against
`examples/<domain>/<id>.json` beside them, as in OSWorld's `evaluation_examples/`), or names in our task set."""

from __future__ import annotations

import json
from pathlib import Path

from verl_cua.envs.base import EnvUsageError
from verl_cua.envs.osworld.tasks import TaskError, load_task, task_path
from verl_cua.envs.task_sets import TaskRef


def osworld_tasks(items: list[str], seeds: str) -> list[TaskRef]:
    """Every task the items name, each validated as OSWorld would load it; `seeds` does not apply (a task is one
    config)."""
    return [ref for item in items for ref in _refs(item)]


def task_files(item: str) -> list[Path]:
    """The task JSON files one `--tasks` item names (a file, a folder, a meta file, or a name in our set)."""
    path = Path(item)
    if path.is_dir():
        files = [f for f in sorted(path.rglob("*.json")) if not _is_meta(f)]
        if not files:
            raise EnvUsageError(f"no OSWorld task JSON under {path}")
        return files
    if path.is_file() and _is_meta(path):
        return _meta_files(path)
    if path.is_file():
        return [path]
    if item.endswith(".json") or "/" in item:
        raise EnvUsageError(f"no OSWorld task file or folder {path}")
    try:
        return [task_path(item)]  # a name in our task set; unknown names list the set
    except TaskError as exc:
        raise EnvUsageError(str(exc)) from None


def _refs(item: str) -> list[TaskRef]:
    refs = []
    for f in task_files(item):
        try:
            config, _ = load_task(str(f))
        except TaskError as exc:
            raise EnvUsageError(f"{f}: {exc}") from None
        refs.append(TaskRef("osworld", str(f.resolve()), f.resolve().parent.name, config["id"]))
    return refs


def _is_meta(path: Path) -> bool:
    """OSWorld's test_all.json shape: {domain: [task ids]}."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and bool(data)
        and "id" not in data
        and all(isinstance(v, list) and all(isinstance(i, str) for i in v) for v in data.values())
    )


def _meta_files(meta: Path) -> list[Path]:
    data = json.loads(meta.read_bytes())
    examples = meta.parent / "examples"
    files = []
    for domain, ids in data.items():
        for tid in ids:
            f = examples / domain / f"{tid}.json"
            if not f.is_file():
                raise EnvUsageError(f"{meta} lists {domain}/{tid}, but {f} does not exist")
            files.append(f)
    return files
