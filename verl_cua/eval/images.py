"""The size a screenshot is sent to the model at, per format; the parser reads coordinates in the same space."""

from __future__ import annotations

import math

from PIL import Image

from verl_cua.actions.geometry import QWEN25VL_RESIZE, UITARS_RESIZE, smart_resize_size

# Qwen3-VL's processor: 16 px patches merged 2x2 (factor 32), up to 16384 merged patches by default.
QWEN3VL_RESIZE = {"factor": 32, "min_pixels": 64 * 32 * 32, "max_pixels": 16384 * 32 * 32}
RESIZE = {"qwen3vl": QWEN3VL_RESIZE, "qwen25vl": QWEN25VL_RESIZE, "uitars": UITARS_RESIZE}
# Anthropic's advice for the computer tool: send at most WXGA and scale the coordinates back.
CLAUDE_MAX = (1280, 800)


def model_image_size(format: str, screen: tuple[int, int], max_pixels: int | None = None) -> tuple[int, int]:
    """The Qwen-VL formats: the processor's own resize (capped at `max_pixels`), so the server changes nothing;
    claude: fit in 1280x800 (or `max_pixels`); pyautogui: the screen itself, whose pixels its coordinates are."""
    if format in RESIZE:
        limits = dict(RESIZE[format])
        if max_pixels is not None:
            limits["max_pixels"] = max(limits["min_pixels"], min(limits["max_pixels"], int(max_pixels)))
        return smart_resize_size(tuple(screen), **limits)
    if format == "claude":
        width, height = screen
        scale = min(1.0, CLAUDE_MAX[0] / width, CLAUDE_MAX[1] / height)
        if max_pixels is not None:
            scale = min(scale, math.sqrt(max_pixels / (width * height)))
        return max(1, round(width * scale)), max(1, round(height * scale))
    return tuple(screen)


def for_model(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    """The screenshot to send for a model that sees it at `size`: shrunk to `size` when that is smaller (the cap
    must be ours), else as it is, since the server's processor makes the same resize from it (fewer bytes)."""
    image = image.convert("RGB") if image.mode != "RGB" else image
    if size[0] * size[1] >= image.size[0] * image.size[1]:
        return image
    return image.resize(size, Image.Resampling.BICUBIC)
