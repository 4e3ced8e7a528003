"""`ToolSet` and its registry: `@register_toolset("CalcTools", app="libreoffice_calc")` above each tool class, whose
`apis` tuple lists `api(name, doc, *params)` entries; `lookup_api`, `apis_for(app)`."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, replace

from verl_cua.actions.apis.base import ApiSpec, Param
from verl_cua.actions.types import ActionError
from verl_cua.registry import Registry

DESKTOP = "desktop"  # the app key of tools offered whatever has the focus


@dataclass(frozen=True)
class ToolSet:
    """One tool class of the format (`CalcTools`): the app it serves and its APIs by name."""

    tool: str
    app: str
    doc: str
    apis: dict[str, ApiSpec]


TOOLSET_REGISTRY: Registry[ToolSet] = Registry("API tool", "tools")


def api(name: str, doc: str, *params: Param, returns: str = "a one-line status") -> ApiSpec:
    """One entry of a tool class's `apis`; `register_toolset` fills in its tool and app."""
    return ApiSpec(tool="", name=name, app="", doc=doc, params=tuple(params), returns=returns)


def register_toolset(tool: str, *, app: str) -> Callable[[type], type]:
    """Class decorator: register the class's `apis` as the tool `tool` serving the OSWorld app key `app`."""

    def decorator(cls: type) -> type:
        apis = {a.name: replace(a, tool=tool, app=app) for a in cls.apis}
        if len(apis) != len(cls.apis):
            raise ValueError(f"{tool} lists an API name twice")
        TOOLSET_REGISTRY.add(tool, ToolSet(tool=tool, app=app, doc=(cls.__doc__ or "").strip(), apis=apis))
        return cls

    return decorator


def lookup_api(tool: str, name: str) -> ApiSpec:
    """The spec of `tool.name`; an unknown tool or method is an ActionError naming the valid (or the closest) ones."""
    load_builtin_toolsets()
    toolset = TOOLSET_REGISTRY.get(tool)
    if toolset is None:
        raise ActionError(f"unknown tool {tool!r:.40}; valid: {', '.join(TOOLSET_REGISTRY.valid())}")
    spec = toolset.apis.get(name)
    if spec is None:
        close = difflib.get_close_matches(str(name), list(toolset.apis), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"valid: {', '.join(sorted(toolset.apis))}"
        raise ActionError(f"{tool} has no API {name!r:.40}; {hint}")
    return spec


def apis_for(app: str | None) -> list[ApiSpec]:
    """The APIs offered while `app` has the focus: the desktop's, then the app's (None: the desktop's only)."""
    load_builtin_toolsets()
    out = []
    for toolset in TOOLSET_REGISTRY.values():
        if toolset.app == DESKTOP:
            out.extend(toolset.apis.values())
    for toolset in TOOLSET_REGISTRY.values():
        if app is not None and toolset.app == app:
            out.extend(toolset.apis.values())
    return out


def load_builtin_toolsets() -> None:
    """The built-in tool modules are registered: `verl_cua.actions.apis` (this module's package, imported before it)
    imports them, so this module never imports the tools that import it."""
    if not any(t.app != DESKTOP for t in TOOLSET_REGISTRY.values()):
        raise RuntimeError("the built-in API tools are not registered: import verl_cua.actions.apis first")
