"""The size a screenshot is sent to the model at (each format's spec says, `model_image_size`), and the screenshot
shrunk to it; the parser reads coordinates in the same space."""

from __future__ import annotations

from PIL import Image

from verl_cua.actions.formats import get_format


def model_image_size(format: str, screen: tuple[int, int], max_pixels: int | None = None) -> tuple[int, int]:
    """The size `format`'s model sees a `screen`-sized screenshot at (`OutputFormat.model_image_size`): the Qwen-VL
    formats' processor resize capped at `max_pixels`, claude's 1280x800 fit, the screen itself for pyautogui."""
    return tuple(get_format(format).model_image_size(tuple(screen), max_pixels))


def for_model(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    """The screenshot to send for a model that sees it at `size`: shrunk to `size` when that is smaller (the cap
    must be ours), else as it is, since the server's processor makes the same resize from it (fewer bytes)."""
    image = image.convert("RGB") if image.mode != "RGB" else image
    if size[0] * size[1] >= image.size[0] * image.size[1]:
        return image
    return image.resize(size, Image.Resampling.BICUBIC)
