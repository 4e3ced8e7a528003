"""Desktops: `make_env(name, **kwargs)` -> `GUIEnv`; `EnvPool` for many of them. Imports no torch or verl."""

from verl_cua.envs.base import (
    ENV_REGISTRY,
    ENV_SPECS,
    EnvSpec,
    EnvUsageError,
    GUIEnv,
    InfraFailure,
    Observation,
    StepResult,
    env_screen,
    env_start_timeout,
    make_env,
    register_env,
)
from verl_cua.envs.pool import EnvLease, EnvPool
from verl_cua.envs.screens import miniwob_screen, osworld_screen

register_env("miniwob", "verl_cua.envs.miniwob:MiniWoBEnv", EnvSpec(screen=miniwob_screen))
register_env("osworld", "verl_cua.envs.osworld.env:OSWorldEnv", EnvSpec(screen=osworld_screen))

__all__ = [
    "ENV_REGISTRY",
    "ENV_SPECS",
    "EnvSpec",
    "EnvLease",
    "EnvPool",
    "EnvUsageError",
    "GUIEnv",
    "InfraFailure",
    "Observation",
    "StepResult",
    "env_screen",
    "env_start_timeout",
    "make_env",
    "register_env",
]
