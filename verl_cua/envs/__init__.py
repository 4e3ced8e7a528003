"""Desktops: `make_env(name, **kwargs)` -> `GUIEnv`; `EnvPool` for many of them. Imports no torch or verl."""

from verl_cua.envs.base import (
    ENV_REGISTRY,
    EnvUsageError,
    GUIEnv,
    InfraFailure,
    Observation,
    StepResult,
    TaskUnscorable,
    begin_step,
    env_screen,
    env_spec,
    env_start_timeout,
    make_env,
    observed_kwargs,
    register_env,
)
from verl_cua.envs.osworld import PROVIDERS
from verl_cua.envs.pool import EnvLease, EnvPool
from verl_cua.envs.screens import miniwob_screen, osworld_screen
from verl_cua.envs.spec import OBSERVATIONS, DesktopCost, EnvSpec

# The built-in envs, one record each (`verl_cua.envs.spec.EnvSpec`); a plug-in registers its own the same way.
MINIWOB_SPEC = EnvSpec(  # a Chromium page; idle ones kept per task
    screen=miniwob_screen,
    desktop=DesktopCost(0.4, 0.5),
    keeps_idle=True,
    seeded_tasks=True,
    tasks="verl_cua.envs.miniwob:miniwob_tasks",
    default_tasks="click-test,click-button,click-link",
    held_out="click-test",
    held_out_seeds="100000-100063",
    needs="MiniWoB++ needs Chromium and chromedriver on the machine.",
    observations=OBSERVATIONS,  # the DOM elements read as the tree
)
OSWORLD_SPEC = EnvSpec(  # docker: a VM; local: Xvfb and apps
    screen=osworld_screen,
    provider="local",
    providers=PROVIDERS,
    provider_desktops={"docker": DesktopCost(4.0, 4)},
    reset_timeout=600.0,  # a reset may revert a VM
    tasks="verl_cua.envs.osworld.task_refs:osworld_tasks",
    start_timeout="verl_cua.envs.osworld.env:start_timeout",
    held_out="OSWorld/evaluation_examples/test_small.json",
    observations=OBSERVATIONS,  # the AT-SPI tree from every provider
    needs=(
        "OSWorld's client `desktop-env` is installed apart, with `verl-cua install-osworld` (the tested version "
        "with --no-deps: its own pins clash with verl). The `docker` provider "
        "needs a Docker daemon this user can reach and `/dev/kvm`; the Ubuntu VM image is downloaded once. The "
        "`local` provider (`PROVIDER=local`, no VM) needs the desktop's system side: `verl-cua setup-desktop`, as "
        "root."
    ),
)
register_env("miniwob", "verl_cua.envs.miniwob:MiniWoBEnv", MINIWOB_SPEC)
register_env("osworld", "verl_cua.envs.osworld.env:OSWorldEnv", OSWORLD_SPEC)
ENV_REGISTRY.mark_built_in()

__all__ = [
    "ENV_REGISTRY",
    "DesktopCost",
    "EnvSpec",
    "EnvLease",
    "EnvPool",
    "EnvUsageError",
    "MINIWOB_SPEC",
    "OSWORLD_SPEC",
    "GUIEnv",
    "InfraFailure",
    "Observation",
    "StepResult",
    "TaskUnscorable",
    "begin_step",
    "env_screen",
    "env_spec",
    "env_start_timeout",
    "make_env",
    "observed_kwargs",
    "register_env",
]
