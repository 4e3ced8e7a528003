"""`EnvSpec`: one record per env, as Gymnasium keeps them: its entry point and every fact the start-up checks, the
doctor, the task lists and the tools read of it without building (or importing) it. `ENV_REGISTRY` holds them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verl_cua.actions.prompts import OBSERVATION_GUIDES
from verl_cua.registry import defined_in

OBSERVATIONS = tuple(OBSERVATION_GUIDES)  # OSWorld's observation types, registered with what the prompt says of each


@dataclass(frozen=True)
class DesktopCost:
    """What one desktop of an env takes from the host that runs it."""

    ram_gb: float
    cores: float


HOST_DESKTOP = DesktopCost(ram_gb=0.6, cores=0.5)  # an Xvfb desktop and its apps on this host
Lazy = str | Callable[..., Any]  # a callable, or `"module:name"` imported on first use


@dataclass(frozen=True)
class EnvSpec:
    """What is known of an env before it is built; `register_env` fills `name` and `entry_point`, the rest defaults
    for a plug-in env that says nothing more."""

    name: str = ""  # what `make_env`, `cua.env.name` and `--env` call it
    entry_point: Lazy | None = None  # the env's class or factory: `entry_point(**kwargs)` builds one
    screen: Callable[[Mapping[str, Any]], tuple[int, int]] | None = None  # its screenshots' size, from its kwargs
    provider: str | None = None  # the `provider` kwarg when none is given; None: the env takes no provider
    desktop: DesktopCost = HOST_DESKTOP  # what one desktop costs the host
    provider_desktops: Mapping[str, DesktopCost] = field(default_factory=dict)  # by provider, where it differs
    keeps_idle: bool = False  # its pool keeps `cua.env.idle_envs` more envs loaded for other tasks
    seeded_tasks: bool = False  # a task runs under many seeds: an eval result names it `domain`, the seed in `task`
    providers: tuple[str, ...] = ()  # the valid `provider` kwargs (empty: the env takes none)
    reset_timeout: float = 120.0  # seconds a reset may take before the pool calls it an infra failure
    # (items, seeds) -> [TaskRef]: what `--tasks` names; None: each item is a task name (with each seed if seeded)
    tasks: Lazy | None = None
    # (pool_size, kwargs) -> seconds one start may take in a pool that size, or None for the pool's default
    start_timeout: Lazy | None = None
    default_tasks: str | None = None  # the tasks a run that names none trains on (verl-agent's sampled tasks)
    held_out: str | None = None  # the tasks an exported recipe scores its checkpoint on
    held_out_seeds: str | None = None  # their seeds (layouts training never saw), for an env of seeded tasks
    needs: str = ""  # what the machine needs for the env, in a sentence (an exported recipe's README)
    observations: tuple[str, ...] = ("screenshot",)  # which of OSWorld's observation types the env can give

    @property
    def origin(self) -> str:
        """Where the env is defined (`module:Name`): two registrations are one when their entry points are."""
        return defined_in(self.entry_point) if self.entry_point is not None else "<no entry point>"

    def provider_in(self, kwargs: Mapping[str, Any]) -> str | None:
        """The provider an env built with `kwargs` runs on; None for an env without providers."""
        return str(kwargs.get("provider") or self.provider) if self.provider else None

    def desktop_cost(self, provider: str | None) -> DesktopCost:
        """What one desktop on `provider` (None: the env's own) costs the host."""
        return self.provider_desktops.get(provider, self.desktop) if provider else self.desktop
