"""The conversation a screenshot agent sees, in one place: the RL agent loop builds its prompts with these functions and
`verl-cua sft-data` builds SFT rows with them, so SFT and RL show a model identical prompts.

Two layouts (`cua.env.rows`):
* `episode`: the system prompt, the first screenshot with the task, then per step the model's reply and the next
  screenshot with `observation_text` (every screenshot stays in context);
* `step`: one prompt per step: the task, earlier replies as text, the last `history_images` screenshots.

Messages use chat-template content parts (`{"type": "image", "image": ...}`, `{"type": "text", "text": ...}`); the
image objects are whatever the caller passes (PIL images, PNG bytes). No torch here.
"""

from __future__ import annotations

from typing import Any

from verl_cua.actions.geometry import smart_resize_size
from verl_cua.actions.prompts import PromptSpec, observation_text

HISTORY_CHARS = 400  # an earlier reply is cut to this many characters in a step prompt


def first_turn(spec: PromptSpec, instruction: str, image: Any, context: str | None = None) -> list[dict[str, Any]]:
    """The episode layout's opening: the system prompt, then the first screenshot (none for a text-only observation,
    `spec.screenshot`) with the task (and `context`, what the turn shows as text: `prompts.turn_context`)."""
    text = spec.user_text(instruction, context)
    return [{"role": "system", "content": spec.system}, _user(image if spec.screenshot else None, text)]


def observation_turn(step: int, error: str | None, image: Any, context: str | None = None) -> dict[str, Any]:
    """The episode layout's user turn after `step` (1-based): the new screenshot (None: a text-only observation, no
    image), why the last reply was invalid, and the turn's `context`."""
    return _user(image, observation_text(step, error, context))


def _user(image: Any, text: str) -> dict[str, Any]:
    """A user turn: the image part (when there is one), then the text."""
    image_part = [] if image is None else [{"type": "image", "image": image}]
    return {"role": "user", "content": [*image_part, {"type": "text", "text": text}]}


def step_prompt(
    spec: PromptSpec,
    instruction: str,
    replies: list[str],
    invalid: list[bool],
    recent: list[Any],
    context: str | None = None,
    earlier: list[str | None] | None = None,
) -> list[dict[str, Any]]:
    """The step layout's prompt: the task, earlier `replies` as text (marked when invalid), the `recent` screenshots
    (none for a text-only observation), and the turn's `context` for this step (the format's, the element table).
    `earlier`: the text observations (element tables) of the window's older turns, oldest first, the last one the
    observation before the latest reply: the same window as the screenshots (`cua.env.history_images`)."""
    history = "".join(
        f"\nStep {i + 1}: {reply.strip()[:HISTORY_CHARS]}" + (" (invalid)" if bad else "")
        for i, (reply, bad) in enumerate(zip(replies, invalid, strict=False))
    )
    text = spec.user_text(instruction) + (f"\nPrevious actions:{history}" if history else "")
    first = len(replies) - len(earlier or []) + 1  # the step the oldest of `earlier` came before
    text += "".join(f"\nBefore step {first + i}: {read}" for i, read in enumerate(earlier or []) if read)
    text += f"\n{context}" if context else ""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "image", "image": image} for image in spec.shown(recent)]
    return [{"role": "system", "content": spec.system}, {"role": "user", "content": content}]


def size_entry(size: Any, key: str) -> Any:
    """`size[key]` of an image processor: a dict (transformers 4) or a `SizeDict` (transformers 5); None if absent."""
    if size is None:
        return None
    if isinstance(size, dict):
        return size.get(key)
    return getattr(size, key, None)


def image_grid_factor(image_processor: Any, max_pixels: int) -> tuple[int, int]:
    """A Qwen-VL image processor's pixel factor (patch x merge) and the pixel cap screenshots are resized to: the
    smaller of `max_pixels` (`cua.env.max_pixels`) and the processor's own limit."""
    if image_processor is None:
        raise ValueError("screenshot agents need a VL model with an image processor (Qwen2.5-VL, Qwen3-VL)")
    factor = int(getattr(image_processor, "patch_size", 14)) * int(getattr(image_processor, "merge_size", 2))
    size = getattr(image_processor, "size", None)
    cap = size_entry(size, "longest_edge") or getattr(image_processor, "max_pixels", None) or max_pixels
    return factor, int(min(max_pixels, cap))


def model_image_size(image_processor: Any, screen: tuple[int, int], max_pixels: int) -> tuple[int, int]:
    """The (width, height) a `screen`-sized screenshot is resized to before the model sees it (training and SFT)."""
    factor, cap = image_grid_factor(image_processor, max_pixels)
    return smart_resize_size(tuple(screen), factor, factor * factor, cap)
