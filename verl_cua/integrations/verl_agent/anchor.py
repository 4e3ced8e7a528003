"""GiGPO's anchor state for a screen: a short hash string that also knows which episode step it was taken at."""

from __future__ import annotations

import re

import numpy as np

from verl_cua.algos.gigpo import screenshot_anchor

ANCHOR_CHARS = 16
# Text that verl-agent's collector would turn into vision tokens: its '<image>' placeholder and Qwen-VL's special
# tokens (a decoded '<|image_pad|>' is re-tokenized as the special token). Model output must never carry them.
_VISION_MARKUP = re.compile(r"<image>|<\|[a-z_]+\|>", re.IGNORECASE)


class StepAnchor(str):
    """A screenshot hash (equal to, and hashing as, the plain string, so verl-agent's own GiGPO groups it as
    one) plus `step`, the index of the step in its episode, which survives verl-agent's batch reordering."""

    step: int

    def __new__(cls, value: str, step: int) -> StepAnchor:
        obj = super().__new__(cls, value)
        obj.step = int(step)
        return obj

    def __reduce__(self):
        return (StepAnchor, (str(self), self.step))


def screen_anchor(image: np.ndarray, step: int) -> StepAnchor:
    """The anchor of the screen the model acts on at `step`: the first 16 hex digits of sha1(pixels, shape)."""
    digest = screenshot_anchor(np.ascontiguousarray(image).tobytes() + repr(image.shape).encode())
    return StepAnchor(digest[:ANCHOR_CHARS], step)


def without_vision_markup(text: str) -> str:
    """`text` with every '<image>' and '<|...|>' token defused, so it cannot add images to a prompt."""
    return _VISION_MARKUP.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)
