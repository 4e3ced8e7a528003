"""The screenshot size of each built-in env from its kwargs, without importing the env (Chromium, desktop-env)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_cua.envs.base import explicit_screen

MINIWOB_AREA = (160, 210)  # MiniWoB++'s task area, the observation at screenshot_scale=1
OSWORLD_SCREEN = (1920, 1080)  # OSWorld's desktops


def miniwob_screen(kwargs: Mapping[str, Any]) -> tuple[int, int]:
    """MiniWoB++'s task area times `screenshot_scale`."""
    width, height = explicit_screen(kwargs) or MINIWOB_AREA
    scale = int(kwargs.get("screenshot_scale", 1))
    return width * scale, height * scale


def osworld_screen(kwargs: Mapping[str, Any]) -> tuple[int, int]:
    """The desktop's `screen` (1920x1080 unless given)."""
    return explicit_screen(kwargs) or OSWORLD_SCREEN
