"""Task lists from the command line: `--tasks` and `--seeds` -> `TaskRef`s (for `verl-cua eval` and the dataset
writer), each with the domain/id pair that names its result directory, as OSWorld's result folders do.

OSWorld: comma-separated task JSON files, folders of them (the domain is the folder's name), OSWorld's meta
files (`{"chrome": ["<id>", ...]}`, resolved against `examples/<domain>/<id>.json` beside them, as in OSWorld's
`evaluation_examples/`), or names in our task set. MiniWoB++: task names, each with `--seeds` or `name@seed`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.envs.base import EnvUsageError

TASK_ENVS = ("miniwob", "osworld")


@dataclass(frozen=True)
class TaskRef:
    """One task to run: what `env.reset()` takes, and the domain/id its results are filed under."""

    env: str
    task: Any
    domain: str
    task_id: str

    @property
    def key(self) -> str:
        """The episode's directory in a run, `<domain>/<task id>`."""
        return f"{self.domain}/{self.task_id}"


def parse_seeds(text: str) -> list[int]:
    """`0-9` or `1,2,3` -> seeds; anything else raises ValueError with the accepted forms."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            if hi < lo:
                raise ValueError
            return list(range(lo, hi + 1))
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"seeds must look like 0-9 or 1,2,3, got {text!r}") from None
    if not seeds:
        raise ValueError(f"no seeds in {text!r}; e.g. 0-9 or 1,2,3")
    return seeds


def resolve_tasks(env: str, spec: str | list[str], seeds: str = "0") -> list[TaskRef]:
    """The tasks named by `spec` (comma-separated string or list) for `env`, in order, duplicates dropped."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s and s.strip()]
    if not items:
        raise EnvUsageError("no tasks given")
    if env == "miniwob":
        refs = _miniwob(items, parse_seeds(seeds))
    elif env == "osworld":
        refs = [ref for item in items for ref in _osworld(item)]
    else:
        raise EnvUsageError(f"unknown env {env!r}; valid envs: {', '.join(TASK_ENVS)}")
    unique: dict[str, TaskRef] = {}
    for ref in refs:
        other = unique.setdefault(ref.key, ref)
        if other.task != ref.task:
            raise EnvUsageError(f"two different tasks would be filed under {ref.key}: {other.task} and {ref.task}")
    return list(unique.values())


def _miniwob(items: list[str], seeds: list[int]) -> list[TaskRef]:
    from verl_cua.envs.miniwob import task_names

    known = set(task_names())
    specs = [item.partition("@") for item in items]
    unknown = [name for name, _, _ in specs if name not in known]
    if unknown:
        raise EnvUsageError(f"unknown MiniWoB task(s) {', '.join(unknown)}; e.g. {', '.join(sorted(known)[:8])}, ...")
    refs = []
    for name, _, seed in specs:
        for s in parse_seeds(seed) if seed else seeds:
            refs.append(TaskRef("miniwob", {"task": name, "seed": s}, name, f"seed-{s}"))
    return refs


def _osworld(item: str) -> list[TaskRef]:
    from verl_cua.envs.osworld.tasks import TaskError, load_task, task_path

    path = Path(item)
    if path.is_dir():
        files = [f for f in sorted(path.rglob("*.json")) if not _is_meta(f)]
        if not files:
            raise EnvUsageError(f"no OSWorld task JSON under {path}")
    elif path.is_file() and _is_meta(path):
        files = _meta_files(path)
    elif path.is_file() or item.endswith(".json"):
        files = [path]
    else:
        files = [task_path(item)]  # a name in our task set; unknown names list the set
    refs = []
    for f in files:
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
