"""`make_gui_envs(config)`: verl-agent's `make_envs` contract, `(train manager, validation manager)`, for our envs."""

from __future__ import annotations

from typing import Any

from verl_cua.envs import ENV_REGISTRY, EnvPool, env_start_timeout, make_env
from verl_cua.envs.task_sets import resolve_tasks
from verl_cua.integrations.verl_agent.env_manager import Fleet, GUIEnvironmentManager
from verl_cua.integrations.verl_agent.settings import env_name, read_settings


def make_gui_envs(config: Any) -> tuple[GUIEnvironmentManager, GUIEnvironmentManager]:
    """Build the managers for `env.env_name=osworld|miniwob`: one pool sized for the larger of the train batch
    (`data.train_batch_size * env.rollout.n`) and the validation batch, shared by both (they never overlap)."""
    env = config.env
    name = env_name(env.env_name)
    if name is None:
        ours = ", ".join(ENV_REGISTRY.valid())
        raise ValueError(f"env.env_name={env.env_name!r} is not a verl-cua env; ours: {ours}")
    if not isinstance(env.rollout.n, int):
        raise ValueError("config.env.rollout.n should be an integer")
    settings = read_settings(name, env.get(name))
    group_n = env.rollout.n if env.rollout.n > 0 else 1
    train_n, val_n = int(config.data.train_batch_size) * group_n, int(config.data.val_batch_size)
    kwargs = settings.env_kwargs(name)
    start = env_start_timeout(name, kwargs, max(train_n, val_n), 120.0)  # docker: lock waits, boot batches, boot
    pool = EnvPool(
        lambda: make_env(name, **kwargs),
        max(train_n, val_n),
        reset_timeout=max(settings.reset_timeout, start or 0.0),  # a docker reset runs a new container: a start
        step_timeout=settings.step_timeout,
        evaluate_timeout=settings.evaluate_timeout,
        start_timeout=start,
        backend=settings.pool_backend,
        hosts=settings.hosts,
    )
    fleet = Fleet(pool)
    common = {"max_steps": int(env.max_steps), "history_length": int(env.get("history_length", 2))}
    envs = GUIEnvironmentManager(
        fleet,
        name,
        settings,
        resolve_tasks(name, settings.tasks),
        env_num=int(config.data.train_batch_size),
        group_n=group_n,
        seed=int(env.seed),
        is_train=True,
        **common,
    )
    val_envs = GUIEnvironmentManager(
        fleet,
        name,
        settings,
        resolve_tasks(name, settings.val_tasks),
        env_num=val_n,
        group_n=1,
        seed=int(env.seed) + 1000,
        is_train=False,
        **common,
    )
    return envs, val_envs
