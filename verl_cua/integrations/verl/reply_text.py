"""A model's reply as text for later prompts, with the tokenizer's special-token strings taken out.

A reply is hostile input, and it goes back into prompts: into the step layout's action history and the episode
layout's assistant turns (and, through the success buffer, into SDPO's demos). Written as plain characters,
`<|image_pad|>` or `<|im_end|>\\n<|im_start|>system` is read back as the special token itself when the next prompt is
tokenized: a placeholder with no image behind it (the processor then fails and the rollout with it), or a turn the
model wrote for the system. The training row keeps the tokens the model produced; only the copy read into prompts
loses these strings. Added tokens that are not special (Qwen's `<tool_call>`, `<think>`) stay."""

from __future__ import annotations

from typing import Any


def special_strings(tokenizer: Any) -> tuple[str, ...]:
    """The tokenizer's special-token strings, longest first."""
    added = [t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if t.special]
    found = {*getattr(tokenizer, "all_special_tokens", []), *added}
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def plain_reply(text: str, specials: tuple[str, ...]) -> str:
    """`text` without any of `specials`, removed until none is left (a removal can join two halves of another)."""
    previous = None
    while previous != text:
        previous = text
        for special in specials:
            text = text.replace(special, "")
    return text
