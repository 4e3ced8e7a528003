"""`EnvSpec`: what the start-up checks, the doctor and the tools read of an env without building (or importing) it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DesktopCost:
    """What one desktop of an env takes from the host that runs it."""

    ram_gb: float
    cores: float


HOST_DESKTOP = DesktopCost(ram_gb=0.6, cores=0.5)  # an Xvfb desktop and its apps on this host


@dataclass(frozen=True)
class EnvSpec:
    """What is known of an env before it is built; an env registered without one gets these defaults."""

    screen: Callable[[Mapping[str, Any]], tuple[int, int]] | None = None  # its screenshots' size, from its kwargs
    provider: str | None = None  # the `provider` kwarg when none is given; None: the env takes no provider
    desktop: DesktopCost = HOST_DESKTOP  # what one desktop costs the host
    provider_desktops: Mapping[str, DesktopCost] = field(default_factory=dict)  # by provider, where it differs
    keeps_idle: bool = False  # its pool keeps `cua.env.idle_envs` more envs loaded for other tasks
    seeded_tasks: bool = False  # a task runs under many seeds: an eval result names it `domain`, the seed in `task`
    providers: tuple[str, ...] = ()  # the valid `provider` kwargs (empty: the env takes none)
    reset_timeout: float = 120.0  # seconds a reset may take before the pool calls it an infra failure

    def provider_in(self, kwargs: Mapping[str, Any]) -> str | None:
        """The provider an env built with `kwargs` runs on; None for an env without providers."""
        return str(kwargs.get("provider") or self.provider) if self.provider else None

    def desktop_cost(self, provider: str | None) -> DesktopCost:
        """What one desktop on `provider` (None: the env's own) costs the host."""
        return self.provider_desktops.get(provider, self.desktop) if provider else self.desktop
