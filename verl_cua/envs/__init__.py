"""Desktops: `make_env(name, **kwargs)` -> `GUIEnv`; `EnvPool` for many of them. Imports no torch or verl."""

from verl_cua.envs.base import (
    ENV_REGISTRY,
    ENV_SPECS,
    EnvUsageError,
    GUIEnv,
    InfraFailure,
    Observation,
    StepResult,
    begin_step,
    env_screen,
    env_spec,
    env_start_timeout,
    make_env,
    register_env,
)
from verl_cua.envs.osworld import PROVIDERS
from verl_cua.envs.pool import EnvLease, EnvPool
from verl_cua.envs.screens import miniwob_screen, osworld_screen
from verl_cua.envs.spec import DesktopCost, EnvSpec

MINIWOB_SPEC = EnvSpec(screen=miniwob_screen, desktop=DesktopCost(0.4, 0.5), keeps_idle=True, seeded_tasks=True)
OSWORLD_SPEC = EnvSpec(
    screen=osworld_screen,
    provider="local",
    providers=PROVIDERS,
    provider_desktops={"docker": DesktopCost(4.0, 4)},
    reset_timeout=600.0,  # a reset may revert a VM
)
register_env("miniwob", "verl_cua.envs.miniwob:MiniWoBEnv", MINIWOB_SPEC)  # a Chromium page; idle ones kept per task
register_env("osworld", "verl_cua.envs.osworld.env:OSWorldEnv", OSWORLD_SPEC)  # docker: a VM; local: Xvfb and apps

__all__ = [
    "ENV_REGISTRY",
    "ENV_SPECS",
    "DesktopCost",
    "EnvSpec",
    "EnvLease",
    "EnvPool",
    "EnvUsageError",
    "GUIEnv",
    "InfraFailure",
    "Observation",
    "StepResult",
    "begin_step",
    "env_screen",
    "env_spec",
    "env_start_timeout",
    "make_env",
    "register_env",
]
