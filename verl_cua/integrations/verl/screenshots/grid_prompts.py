"""Prompt tokens from the screenshots' grids, not their patches: verl's Continuous Token builder renders every VL
prompt through the whole processor (PNG-sized images resized, normalised and cut into fp32 patches, ~60 ms a
1312x736 screenshot), keeps only `input_ids` and drops the patches. The tokens depend on each image's grid alone:
the chat template's one image token per image becomes grid/merge^2 of them. `use_grid_prompts` makes a builder do
just that. The first prompt of each processor (and generation-prompt setting) is rendered both ways and compared;
a processor whose tokens differ (extra processor kwargs, another placeholder scheme) keeps verl's render for the
rest of the process. A prompt whose image tokens do not match its images goes to verl's render alone."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from verl.utils.tokenizer.chat_template import apply_chat_template
from verl.utils.tokenizer.continuous_token import VLContinuousTokenMixin

from verl_cua.integrations.verl.screenshots.compact import image_grid

logger = logging.getLogger(__name__)

# processor -> {add_generation_prompt: whether grid prompts equal verl's render}, filled by each first comparison
_verdicts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class ImageTokenMismatch(ValueError):
    """The prompt's image tokens and its images do not pair up."""


def grid_prompt_ids(processor: Any, text: str, images: list) -> list[int]:
    """The processor's `input_ids` for `text` (chat template applied) and `images`, from each image's grid."""
    token = processor.image_token
    parts = text.split(token)
    if len(parts) - 1 != len(images):
        raise ImageTokenMismatch(f"the prompt holds {len(parts) - 1} image tokens for {len(images)} images")
    merge = int(processor.image_processor.merge_size)
    counts = [int(image_grid(image, processor.image_processor).prod()) // merge**2 for image in images]
    expanded = parts[0] + "".join(token * n + part for n, part in zip(counts, parts[1:], strict=True))
    return list(processor.tokenizer(expanded)["input_ids"])


def use_grid_prompts(builder: Any) -> bool:
    """Make a VL Continuous Token builder render image-only prompts from grids; whether it now does."""
    original = getattr(builder, "render_tokens_with_mm", None)
    if original is None or getattr(original, "__verl_cua_grid__", False):
        return original is not None
    if type(builder).render_tokens_with_mm is not VLContinuousTokenMixin.render_tokens_with_mm:
        return False  # its own post-processing (MiniMax-VL's scaffold) would be skipped

    def render_tokens_with_mm(messages, images, *, videos=None, audios=None, add_generation_prompt=True, tools=None,
                              mm_inputs_out=None):  # fmt: skip
        processor = builder.processor
        plain = not images or videos or audios or mm_inputs_out is not None or builder.mm_processor_kwargs
        verdicts = {} if plain else _verdicts_of(processor)
        if plain or verdicts.get(add_generation_prompt) is False:
            return original(messages, images, videos=videos, audios=audios, add_generation_prompt=add_generation_prompt,
                            tools=tools, mm_inputs_out=mm_inputs_out)  # fmt: skip
        kwargs = dict(builder.chat_template_kwargs)
        if tools:
            kwargs["tools"] = tools
        try:
            text = apply_chat_template(
                processor, messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
            )
            fast = grid_prompt_ids(processor, text, list(images))
        except ImageTokenMismatch:  # this prompt's business (verl's render says what is wrong with it)
            return original(messages, images, add_generation_prompt=add_generation_prompt, tools=tools)
        except Exception as exc:  # noqa: BLE001 - a processor we cannot read: verl's render, from now on
            logger.warning("verl-cua: cannot build prompt tokens from grids (%s); using verl's processor render", exc)
            verdicts[add_generation_prompt] = False
            return original(messages, images, add_generation_prompt=add_generation_prompt, tools=tools)
        if add_generation_prompt not in verdicts:
            full = original(messages, images, add_generation_prompt=add_generation_prompt, tools=tools)
            with _lock:
                verdicts[add_generation_prompt] = list(full) == fast
            if not verdicts[add_generation_prompt]:
                logger.warning("verl-cua: prompt tokens from grids differ from the processor's; using verl's render")
            return full
        return fast

    render_tokens_with_mm.__verl_cua_grid__ = True
    builder.render_tokens_with_mm = render_tokens_with_mm
    return True


def _verdicts_of(processor: Any) -> dict:
    """This processor's verdicts (by add_generation_prompt)."""
    with _lock:
        verdicts = _verdicts.get(processor)
        if verdicts is None:
            verdicts = _verdicts[processor] = {}
        return verdicts
