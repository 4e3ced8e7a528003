"""The `miniwob-clicks` env: MiniWoB++'s `click-*` tasks only, its record MiniWoB++'s with its own task resolver and
held-out task. One `register_env` call is all verl-cua needs (eval, datasets, training, verl-agent)."""

from __future__ import annotations

from dataclasses import replace

from verl_cua.envs import MINIWOB_SPEC, EnvUsageError, register_env
from verl_cua.envs.miniwob import miniwob_tasks
from verl_cua.envs.task_sets import TaskRef


def click_tasks(items: list[str], seeds: str) -> list[TaskRef]:
    """MiniWoB++'s own resolver for `click-*` names, filed under this env; any other name fails in one line."""
    others = [item for item in items if not item.startswith("click-")]
    if others:
        raise EnvUsageError(f"miniwob-clicks runs click-* tasks only, not {', '.join(others)}")
    return [replace(ref, env="miniwob-clicks") for ref in miniwob_tasks(items, seeds)]


register_env(
    "miniwob-clicks",
    "verl_cua.envs.miniwob:MiniWoBEnv",
    replace(
        MINIWOB_SPEC, tasks=f"{__name__}:click_tasks", default_tasks="click-test,click-button", held_out="click-test"
    ),
)
