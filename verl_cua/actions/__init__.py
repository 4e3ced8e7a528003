"""The GUI action layer: every major computer-use output format parsed safely into screen actions.

Imports no torch, verl or ray. Entry points: `parse_action(text, format=..., screen=(w, h))` and its
inverse `render_action(actions, format=..., screen=(w, h))`.
"""

from verl_cua.actions.formats import FORMAT_REGISTRY, get_format, register_format
from verl_cua.actions.parse import parse_action
from verl_cua.actions.prompts import PromptSpec, build_prompt
from verl_cua.actions.types import ACTION_KINDS, ActionError, GUIAction, ParsedAction
from verl_cua.actions.write import render_action


def available_formats() -> list[str]:
    """Names accepted by `parse_action(format=...)`, `auto` included."""
    return FORMAT_REGISTRY.valid()


__all__ = [
    "ACTION_KINDS",
    "ActionError",
    "FORMAT_REGISTRY",
    "GUIAction",
    "ParsedAction",
    "PromptSpec",
    "available_formats",
    "build_prompt",
    "get_format",
    "parse_action",
    "register_format",
    "render_action",
]
