"""The built-in tool classes of the `api_gui` format, one per file (each registers itself on import)."""

from verl_cua.actions.apis.tools import calc, desktop, impress, writer  # noqa: F401
