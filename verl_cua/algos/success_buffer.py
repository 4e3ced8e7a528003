"""Per-task buffer of recent successful trajectories, deduplicated by key (ARPO replay, Entropulse SFT data)."""

from __future__ import annotations

import hashlib
import json
import random
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any


def _check_per_task(per_task: int) -> int:
    """Validate the per-task capacity."""
    if isinstance(per_task, bool) or not isinstance(per_task, int) or per_task < 1:
        raise ValueError(f"per_task must be an integer >= 1, got {per_task!r}")
    return per_task


class SuccessBuffer:
    """Keeps, per task (the trainer: per task instance), the last `per_task` items (the trainer: whole successful
    trajectories), one per caller-given key."""

    def __init__(self, per_task: int = 8) -> None:
        self.per_task = _check_per_task(per_task)
        self._items: dict[str, OrderedDict[Hashable, Any]] = {}

    def add(self, task: str, key: Hashable, item: Any) -> bool:
        """Store item as the task's newest; an existing key is replaced and moved to newest. True if the key is new."""
        slot = self._items.setdefault(task, OrderedDict())
        is_new = key not in slot
        slot[key] = item
        slot.move_to_end(key)
        while len(slot) > self.per_task:
            slot.popitem(last=False)
        return is_new

    def get(self, task: str) -> list:
        """The task's items, oldest first (empty for an unknown task)."""
        return list(self._items.get(task, {}).values())

    def sample(self, task: str, n: int, rng: random.Random) -> list:
        """Up to n of the task's items, without replacement."""
        items = self.get(task)
        return rng.sample(items, min(max(n, 0), len(items)))

    def sample_all(self, n: int, rng: random.Random) -> list:
        """Up to n items stratified across tasks: cycle tasks in sorted order, one random unused item each."""
        pools = []
        for task in self.tasks():
            pool = self.get(task)
            rng.shuffle(pool)
            pools.append(pool)
        out: list = []
        while len(out) < n and any(pools):
            for pool in pools:
                if pool and len(out) < n:
                    out.append(pool.pop())
        return out

    def tasks(self) -> list[str]:
        """Task ids holding at least one item, sorted."""
        return sorted(task for task, slot in self._items.items() if slot)

    def __len__(self) -> int:
        """Total number of stored items."""
        return sum(len(slot) for slot in self._items.values())

    def state_dict(self) -> dict[str, Any]:
        """Plain-dict snapshot: {"per_task": int, "tasks": {task: [[key, item], ...] oldest first}}."""
        return {
            "per_task": self.per_task,
            "tasks": {task: [[key, item] for key, item in slot.items()] for task, slot in self._items.items() if slot},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict snapshot (keeping this buffer's per_task; the oldest items go when over it)."""
        self._items = {}
        for task, pairs in state["tasks"].items():
            for key, item in pairs:
                self.add(task, key, item)


def trajectory_key(actions: Sequence[str]) -> str:
    """Dedup key of a trajectory: sha1 of its whitespace-normalized actions joined by newlines."""
    text = "\n".join(" ".join(action.split()) for action in actions)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def task_instance(task: Any) -> str:
    """The key of one task instance: the task id, plus its seed (`click-test@seed=7`) or a hash of its other
    settings, so buffered successes of one MiniWoB++ layout or OSWorld config never stand in for another's."""
    if not isinstance(task, dict):
        return str(task)
    base = str(task.get("task", task.get("id", "")))
    rest = {k: v for k, v in task.items() if k not in ("task", "id")}
    if not rest:
        return base
    if set(rest) == {"seed"}:
        return f"{base}@seed={rest['seed']}"
    digest = hashlib.sha1(json.dumps(rest, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:12]
    return f"{base}@{digest}"


def instance_of(extra_fields: dict) -> str:
    """The task instance of an agent-loop row (`cua_instance`; rows written before it existed: `cua_task`)."""
    return str(extra_fields.get("cua_instance") or extra_fields.get("cua_task", ""))
