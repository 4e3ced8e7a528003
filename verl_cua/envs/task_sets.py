"""Task lists from the command line: `--tasks` and `--seeds` -> `TaskRef`s (for `verl-cua eval`, the dataset
writer and verl-agent), each with the domain/id pair that names its result directory, as OSWorld's result folders do.

How an env's items resolve is its record's `tasks` (`EnvSpec.tasks`): MiniWoB++ takes task names, each with `--seeds`
or `name@seed` (`verl_cua.envs.miniwob.miniwob_tasks`); OSWorld task JSON files, folders and meta files
(`verl_cua.envs.osworld.task_refs`). An env whose record says nothing takes each item as a task name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl_cua.envs.base import ENV_REGISTRY, EnvUsageError
from verl_cua.envs.spec import EnvSpec
from verl_cua.registry import resolve


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
    """The tasks named by `spec` (comma-separated string or list) for `env`, in order, duplicates dropped; unknown
    envs and tasks fail in one line (`EnvUsageError`)."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s and s.strip()]
    if not items:
        raise EnvUsageError("no tasks given")
    try:
        record = ENV_REGISTRY.lookup(env)
    except ValueError as exc:
        raise EnvUsageError(str(exc)) from None
    refs = resolve(record.tasks)(items, seeds) if record.tasks is not None else named_tasks(env, items, seeds, record)
    return unique_refs(refs)


def unique_refs(refs: list[TaskRef]) -> list[TaskRef]:
    """`refs` in order with repeats dropped; two different tasks filed under one key fail in one line."""
    unique: dict[str, TaskRef] = {}
    for ref in refs:
        other = unique.setdefault(ref.key, ref)
        if other.task != ref.task:
            raise EnvUsageError(f"two different tasks would be filed under {ref.key}: {other.task} and {ref.task}")
    return list(unique.values())


def named_tasks(env: str, items: list[str], seeds: str, record: EnvSpec) -> list[TaskRef]:
    """An env whose record names no resolver: each item is a task name `reset` takes; an env of seeded tasks runs
    each under every seed (`name@seed` for one), as `{"task": name, "seed": seed}`."""
    if not record.seeded_tasks:
        return [TaskRef(env, item, env, item) for item in items]
    default, refs = parse_seeds(seeds), []
    for name, _, seed in (item.partition("@") for item in items):
        for s in parse_seeds(seed) if seed else default:
            refs.append(TaskRef(env, {"task": name, "seed": s}, name, f"seed-{s}"))
    return refs
