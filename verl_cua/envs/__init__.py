"""Desktops: `make_env(name, **kwargs)` -> `GUIEnv`; `EnvPool` for many of them. Imports no torch or verl."""

from verl_cua.envs.base import (
    ENV_REGISTRY,
    EnvUsageError,
    GUIEnv,
    InfraFailure,
    Observation,
    StepResult,
    env_start_timeout,
    make_env,
    register_env,
)
from verl_cua.envs.pool import EnvLease, EnvPool

register_env("miniwob", "verl_cua.envs.miniwob:MiniWoBEnv")
register_env("osworld", "verl_cua.envs.osworld.env:OSWorldEnv")

__all__ = [
    "ENV_REGISTRY",
    "EnvLease",
    "EnvPool",
    "EnvUsageError",
    "GUIEnv",
    "InfraFailure",
    "Observation",
    "StepResult",
    "env_start_timeout",
    "make_env",
    "register_env",
]
