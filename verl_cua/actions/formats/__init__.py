"""Registry of model output formats: `@register_format(name)` above each parser class, `get_format(name)`."""

from verl_cua.actions.formats.base import (  # noqa: F401  (the package's API)
    FORMAT_MEMBERS,
    FORMAT_REGISTRY,
    BaseFormat,
    FormatResult,
    OutputFormat,
    ParseContext,
    cannot,
    describe,
    get_format,
    register_format,
    trainable_formats,
)


def _load_builtin_formats() -> None:
    from verl_cua.actions.formats import api_gui, claude, pyautogui, qwen3vl, qwen25vl, uitars  # noqa: F401


_load_builtin_formats()
FORMAT_REGISTRY.mark_built_in()
