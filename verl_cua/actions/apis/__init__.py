"""App APIs of the `api_gui` action format: specs, checked calls and the tool registry (no code runs here)."""

from verl_cua.actions.apis import tools  # noqa: F401  (the built-in tools register themselves)
from verl_cua.actions.apis.base import MAX_RESULT_CHARS, REQUIRED, ApiSpec, Param, check_value
from verl_cua.actions.apis.toolset import (
    DESKTOP,
    TOOLSET_REGISTRY,
    ToolSet,
    api,
    apis_for,
    load_builtin_toolsets,
    lookup_api,
    register_toolset,
)

__all__ = [
    "DESKTOP",
    "MAX_RESULT_CHARS",
    "REQUIRED",
    "TOOLSET_REGISTRY",
    "ApiSpec",
    "Param",
    "ToolSet",
    "api",
    "apis_for",
    "check_value",
    "load_builtin_toolsets",
    "lookup_api",
    "register_toolset",
]
