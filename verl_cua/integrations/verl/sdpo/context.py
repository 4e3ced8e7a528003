"""SDPO's teacher context for a GUI row: the student's own prompt and images plus a feedback block at the end of the
first user turn (a successful sibling's actions, the evaluator's feedback, the failed attempt's final screenshot),
followed by the same response tokens; Qwen-VL M-RoPE position ids recomputed for the longer sequence."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from PIL import Image

from verl_cua.integrations.verl.screenshots.compact import decode_png, image_grid, insert_png, is_compact

BLOCK_HEADER = "Feedback on an earlier attempt at this task:"
BLOCK_FOOTER = "Now act on the original task."


@dataclass
class FeedbackBlock:
    """What the teacher sees in addition to the student's context (text before and after the optional image)."""

    head: str
    tail: str
    image: Image.Image | None = None


def feedback_block(
    demo_actions: list[str] | None,
    score: float,
    feedback: str,
    final_screenshot: bytes | Image.Image | None,
    max_chars: int = 2000,
) -> FeedbackBlock:
    """The block's text and image; `demo_actions` (every step, fitted beforehand with `fit_demo`) come from a
    successful sibling, the rest from this attempt; the feedback text is cut at `max_chars`."""
    lines = [f"\n\n{BLOCK_HEADER}"]
    if demo_actions:
        steps = "\n".join(f"Step {i + 1}: {' '.join(a.split())}" for i, a in enumerate(demo_actions))
        lines.append(f"A successful attempt did:\n{steps}")
    verdict = f"Your attempt scored {score:.2f}."
    lines.append(f"{verdict} The evaluator said: {feedback.strip()}"[:max_chars] if feedback.strip() else verdict)
    image = _as_image(final_screenshot)
    if image is not None:
        lines.append("The screen at the end of your attempt:")
    return FeedbackBlock(head="\n".join(lines), tail=f"\n{BLOCK_FOOTER}", image=image)


def fit_demo(actions: list[str], max_tokens: int, encode, decode) -> list[str]:
    """Every step of a demo, each cut to a common token cap (the largest that keeps the total within `max_tokens`),
    so a long demo keeps all of its steps and only its longest actions lose their ends."""
    ids = [list(encode(" ".join(a.split()))) for a in actions]
    if sum(map(len, ids)) <= max_tokens:
        return list(actions)
    low, high = 0, max(map(len, ids))
    while low < high:  # the largest cap c with sum(min(len, c)) <= max_tokens
        cap = (low + high + 1) // 2
        if sum(min(len(t), cap) for t in ids) <= max_tokens:
            low = cap
        else:
            high = cap - 1
    return [decode(t[:low]) + ("..." if len(t) > low else "") for t in ids]


def _as_image(value: bytes | Image.Image | None) -> Image.Image | None:
    if value is None or isinstance(value, Image.Image):
        return value
    return decode_png(value)


class TeacherContextBuilder:
    """Builds teacher rows for one tokenizer/processor pair (Qwen2.5-VL, Qwen3-VL, UI-TARS)."""

    def __init__(self, tokenizer, processor):
        self.tokenizer = tokenizer
        self.processor = processor
        self.im_end = self._token_id("<|im_end|>")
        self.vision_start = self._token_id("<|vision_start|>")
        self.vision_end = self._token_id("<|vision_end|>")
        self.image_pad = self._token_id(getattr(processor, "image_token", None) or "<|image_pad|>")
        image_processor = processor.image_processor
        self.merge = int(getattr(image_processor, "merge_size", 2))

    def _token_id(self, token: str) -> int:
        tid = self.tokenizer.convert_tokens_to_ids(token)
        if not isinstance(tid, int) or tid == self.tokenizer.unk_token_id:
            raise ValueError(f"the SDPO teacher context needs the chat token {token!r}, which this tokenizer lacks")
        return tid

    def insert_at(self, prompt_ids: torch.Tensor) -> int:
        """Where the block goes: before the `<|im_end|>` closing the user turn that ends the prompt."""
        hits = (prompt_ids == self.im_end).nonzero().flatten()
        if len(hits) == 0:
            raise ValueError("the prompt has no <|im_end|>: not a chat-templated prompt")
        return int(hits[-1])

    def build(
        self, prompt_ids: torch.Tensor, response_ids: torch.Tensor, multi_modal_inputs: dict, block: FeedbackBlock
    ) -> dict:
        """Teacher `prompts`, `input_ids`, `position_ids`, `multi_modal_inputs` for the same `response_ids`."""
        at = self.insert_at(prompt_ids)
        ids = self.encode(block.head)
        mm = dict(multi_modal_inputs or {})
        if block.image is not None:
            compact = is_compact(mm)  # rows carry PNG screenshots: the engine makes the patches at the forward
            image_inputs = (
                None if compact else self.processor.image_processor(images=[block.image], return_tensors="pt")
            )
            grid = (
                image_grid(block.image, self.processor.image_processor) if compact else image_inputs["image_grid_thw"]
            )
            grid = grid.to(torch.long)
            n_pad = int(grid.prod()) // (self.merge * self.merge)
            ids += [self.vision_start] + [self.image_pad] * n_pad + [self.vision_end]
            before = int((prompt_ids[:at] == self.vision_start).sum())
            if compact:
                mm = insert_png(mm, before, block.image, grid)
            else:
                mm = insert_image(mm, before, image_inputs["pixel_values"], grid)
        ids += self.encode(block.tail)
        block_ids = torch.tensor(ids, dtype=prompt_ids.dtype)
        prompts = torch.cat([prompt_ids[:at], block_ids, prompt_ids[at:]])
        input_ids = torch.cat([prompts, response_ids.to(prompts.dtype)])
        position_ids = self.position_ids(input_ids, mm.get("image_grid_thw"))
        return {"prompts": prompts, "input_ids": input_ids, "position_ids": position_ids, "multi_modal_inputs": mm}

    def encode(self, text: str) -> list[int]:
        """Token ids of text without special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []

    def position_ids(self, input_ids: torch.Tensor, image_grid_thw: torch.Tensor | None) -> torch.Tensor:
        """verl's layout: [4, L] = text positions over the 3 M-RoPE rows (or [L] for models without M-RoPE)."""
        length = input_ids.shape[0]
        text = torch.arange(length, dtype=torch.long)
        if not hasattr(self.processor, "get_rope_index"):
            return text
        ids = input_ids.unsqueeze(0)
        mm_types = (ids == self.image_pad).to(torch.long)
        vision, _ = self.processor.get_rope_index(
            input_ids=ids,
            mm_token_type_ids=mm_types,
            image_grid_thw=image_grid_thw,
            attention_mask=torch.ones_like(ids),
        )
        return torch.cat([text.unsqueeze(0), vision[:, 0, :].to(torch.long)], dim=0)


def insert_image(mm: dict, index: int, pixel_values: torch.Tensor, grid: torch.Tensor) -> dict:
    """`multi_modal_inputs` with one more image at position `index` (patches, grid and per-image lengths)."""
    old_grid = mm.get("image_grid_thw")
    old_pixels = mm.get("pixel_values")
    if old_grid is None or old_pixels is None:
        new_grid, new_pixels = grid, pixel_values
    else:
        patches = old_grid.prod(dim=-1)
        offset = int(patches[:index].sum())
        new_pixels = torch.cat([old_pixels[:offset], pixel_values.to(old_pixels.dtype), old_pixels[offset:]])
        new_grid = torch.cat([old_grid[:index], grid.to(old_grid.dtype), old_grid[index:]])
    out = dict(mm)
    out["pixel_values"] = new_pixels
    out["image_grid_thw"] = new_grid
    out["images_seqlens"] = torch.repeat_interleave(new_grid[:, 1] * new_grid[:, 2], new_grid[:, 0])
    return out
