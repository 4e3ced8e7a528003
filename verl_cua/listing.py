"""`verl-cua list`: every name verl-cua registers (action formats, chat APIs, envs, and its names in verl's own
registries), each with where it is defined. Reads the registries only: builds no env and imports no torch or verl."""

from __future__ import annotations

from collections.abc import Callable

from verl_cua.envs.spec import EnvSpec

Row = tuple[str, ...]


def _formats() -> list[Row]:
    from verl_cua.actions import FORMAT_REGISTRY

    return list(FORMAT_REGISTRY.origins().items())


def _apis() -> list[Row]:
    from verl_cua.eval.apis import API_REGISTRY

    return list(API_REGISTRY.origins().items())


def _envs() -> list[Row]:
    from verl_cua.envs import ENV_REGISTRY, env_spec

    return [(name, where, describe_spec(env_spec(name))) for name, where in ENV_REGISTRY.origins().items()]


def _verl() -> list[Row]:
    from verl_cua.integrations.verl.plugin import REGISTERED

    return list(REGISTERED)


GROUPS: dict[str, tuple[str, Callable[[], list[Row]]]] = {
    "formats": ("model output formats (cua.action.format, --format; `auto` detects among them)", _formats),
    "apis": ("chat APIs of the eval harness (--provider-api)", _apis),
    "envs": ("desktops (cua.env.name, --env) and what their EnvSpec says", _envs),
    "verl": ("what verl-cua's plug-in registers in verl's own registries", _verl),
}


def describe_spec(spec: EnvSpec) -> str:
    """What an `EnvSpec` says, in one line: screenshot size, provider, one desktop's host cost, pool and task traits."""
    try:
        screen = spec.screen({}) if spec.screen is not None else None
    except (KeyError, TypeError, ValueError):
        screen = None
    parts = [f"screen {screen[0]}x{screen[1]}" if screen else "screen from kwargs.screen"]
    if spec.provider:
        parts.append(f"provider {spec.provider} by default")
    cost = f"desktop {spec.desktop.ram_gb:g} GB RAM, {spec.desktop.cores:g} cores"
    others = ", ".join(f"{p}: {c.ram_gb:g} GB, {c.cores:g} cores" for p, c in spec.provider_desktops.items())
    parts.append(f"{cost} ({others})" if others else cost)
    if spec.keeps_idle:
        parts.append("idle envs kept loaded")
    if spec.seeded_tasks:
        parts.append("tasks run under seeds")
    return "; ".join(parts)


def listing(group: str = "all") -> str:
    """The names of `group` (formats, apis, envs, verl, or all), a heading line per group and a line per name."""
    if group != "all" and group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; valid groups: {', '.join(GROUPS)}, all")
    lines = []
    for key in GROUPS if group == "all" else [group]:
        title, rows = GROUPS[key]
        lines.append(f"{key}: {title}")
        lines += _aligned(rows())
    return "\n".join(lines) + "\n"


def api_listing(app: str | None = None) -> str:
    """`verl-cua apis`: the app APIs of the `api_gui` format grouped by tool, each with its signature and doc; with
    `app`, what the agent is offered while that app has the focus (the desktop's tools, then the app's)."""
    from verl_cua.actions.apis import TOOLSET_REGISTRY, apis_for, load_builtin_toolsets

    load_builtin_toolsets()
    toolsets = list(TOOLSET_REGISTRY.values())
    if app is not None:
        apps = sorted({t.app for t in toolsets})
        if app not in apps:
            raise ValueError(f"no APIs for app {app!r}; valid apps: {', '.join(apps)}")
        offered = {spec.tool for spec in apis_for(app)}
        toolsets = [t for t in toolsets if t.tool in offered]
    lines = []
    for toolset in toolsets:
        lines.append(f"{toolset.tool} (app {toolset.app}): {toolset.doc}")
        lines += [f"  {spec.signature()}" for spec in toolset.apis.values()]
    return "\n".join(lines) + "\n"


def api_apps() -> list[str]:
    """The app keys that have APIs (`desktop`: offered whatever has the focus)."""
    from verl_cua.actions.apis import TOOLSET_REGISTRY, load_builtin_toolsets

    load_builtin_toolsets()
    return sorted({t.app for t in TOOLSET_REGISTRY.values()})


def _aligned(rows: list[Row]) -> list[str]:
    """Indented lines, each column but the last padded to its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] if rows else []
    return ["  " + "  ".join([*(row[i].ljust(w) for i, w in enumerate(widths)), row[-1]]) for row in rows]
