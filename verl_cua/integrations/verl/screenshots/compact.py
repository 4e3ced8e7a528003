"""Screenshots in training rows as PNG bytes, not fp32 `pixel_values`.

verl stores each row's processor output in TransferQueue: a 1M-pixel screenshot is ~22 MiB of fp32 patches, ~85 GB
a step at the flagship's scale. Rows keep the processor's small fields (`image_grid_thw`, `images_seqlens`, which
M-RoPE positions need) and the screenshots as lossless PNG under `cua_images`; the engine turns them back into
`pixel_values` one micro-batch at a time, just before the forward (`CompactImagesFSDPEngine`), and checks that the grid
it gets is the stored one."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import torch
from PIL import Image

from verl_cua.actions.conversation import size_entry

KEY = "cua_images"
PNG_LEVEL = 1  # zlib level: screenshots compress ~8x at level 1, barely better at 6, at a third of the time


def png_bytes(image: Image.Image) -> bytes:
    """An RGB screenshot as PNG bytes (lossless: the decoded pixels are the rollout's)."""
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG", compress_level=PNG_LEVEL)
    return buf.getvalue()


def decode_png(data: bytes) -> Image.Image:
    """PNG bytes back to an RGB image."""
    image = Image.open(io.BytesIO(bytes(data)))
    image.load()
    return image.convert("RGB")


def compact(multi_modal_inputs: dict[str, Any], images: Iterable[Image.Image]) -> dict[str, Any]:
    """`multi_modal_inputs` with its `pixel_values` replaced by the images as PNG bytes (in prompt order)."""
    out = {k: v for k, v in multi_modal_inputs.items() if k != "pixel_values"}
    out[KEY] = [png_bytes(image) for image in images]
    return out


def is_compact(multi_modal_inputs: Any) -> bool:
    """Whether a row's `multi_modal_inputs` holds PNG screenshots still to be expanded."""
    return isinstance(multi_modal_inputs, dict) and KEY in multi_modal_inputs


def expand_one(data: bytes, image_processor: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """One PNG screenshot's `pixel_values` and `image_grid_thw` row, as the processor makes them."""
    processed = image_processor(images=[decode_png(data)], return_tensors="pt")
    return processed["pixel_values"], processed["image_grid_thw"].to(torch.long)


def expand(multi_modal_inputs: dict[str, Any], image_processor: Any, cache: Any = None) -> dict[str, Any]:
    """A compact row's `multi_modal_inputs` with `pixel_values` from its PNGs (through `cache` when given)."""
    # the processor works on each image alone: one image's patches do not depend on the others in its row, so
    # screenshots expanded one by one (and cached) equal the row's batch; the grid must match the stored one
    if not is_compact(multi_modal_inputs):
        return multi_modal_inputs
    out = {k: v for k, v in multi_modal_inputs.items() if k != KEY}
    pngs = list(multi_modal_inputs[KEY])
    if not pngs:
        return out
    parts = [cache.get(data) if cache is not None else expand_one(data, image_processor) for data in pngs]
    grid = torch.cat([g for _, g in parts])
    _check_grid(grid, out)
    out["pixel_values"] = torch.cat([p for p, _ in parts])  # a new tensor: the cached ones are never handed out
    out.setdefault("image_grid_thw", grid)
    return out


def expand_grids(rows: Iterable[Any], image_processor: Any, cache: Any) -> tuple[list[Any], list[Any]] | None:
    """Every row's `multi_modal_inputs` checked against its screenshots' grids but without `pixel_values`, and the
    micro-batch's patches in row order (cached tensors, not copied); None when a row is not compact but holds
    patches of its own (their order among ours would be lost) or no row is compact."""
    values = [getattr(row, "data", row) for row in rows]
    if not any(is_compact(v) for v in values):
        return None
    if any(not is_compact(v) and isinstance(v, dict) and "pixel_values" in v for v in values):
        return None
    out, patches = [], []
    for value in values:
        if not is_compact(value):
            out.append(value)
            continue
        row = {k: v for k, v in value.items() if k != KEY}
        parts = [cache.get(data) for data in value[KEY]]
        if parts:
            _check_grid(torch.cat([g for _, g in parts]), row)
            row.setdefault("image_grid_thw", torch.cat([g for _, g in parts]))
        patches += [p for p, _ in parts]
        out.append(row)
    return out, patches


def _check_grid(grid: torch.Tensor, row: dict[str, Any]) -> None:
    """The grid the screenshots expand to must be the one the row was built with."""
    stored = row.get("image_grid_thw")
    if stored is not None and not torch.equal(grid, torch.as_tensor(stored).to(torch.long)):
        raise ValueError(
            f"compact screenshots expand to image_grid_thw {grid.tolist()}, the row was built with "
            f"{torch.as_tensor(stored).tolist()}: the processor differs between rollout and training"
        )


def expand_rows(rows: Iterable[Any], image_processor: Any, cache: Any = None) -> list[Any] | None:
    """Every row's `multi_modal_inputs` expanded; None when no row is compact (nothing to do)."""
    values = [getattr(row, "data", row) for row in rows]
    if not any(is_compact(v) for v in values):
        return None
    return [expand(v, image_processor, cache) for v in values]


def row_pngs(rows: Iterable[Any]) -> list[bytes]:
    """The PNG screenshots of every compact row, in row order."""
    values = [getattr(row, "data", row) for row in rows]
    return [data for v in values if is_compact(v) for data in v[KEY]]


def image_grid(image: Image.Image, image_processor: Any) -> torch.Tensor:
    """The `image_grid_thw` row the Qwen-VL `image_processor` gives `image`, without making its patches."""
    from verl_cua.actions.geometry import smart_resize_size

    patch, merge = int(image_processor.patch_size), int(image_processor.merge_size)
    size = getattr(image_processor, "size", None)
    low = size_entry(size, "shortest_edge") or getattr(image_processor, "min_pixels", None) or (patch * merge) ** 2
    high = (
        size_entry(size, "longest_edge") or getattr(image_processor, "max_pixels", None) or 16384 * (patch * merge) ** 2
    )
    width, height = smart_resize_size(image.size, patch * merge, int(low), int(high))
    return torch.tensor([[1, height // patch, width // patch]], dtype=torch.long)


def insert_png(mm: dict[str, Any], index: int, image: Image.Image, grid: torch.Tensor) -> dict[str, Any]:
    """A compact row's `multi_modal_inputs` with one more screenshot at position `index` (PNG, grid, lengths)."""
    out = dict(mm)
    pngs = list(mm.get(KEY) or [])
    pngs.insert(index, png_bytes(image))
    old_grid = mm.get("image_grid_thw")
    new_grid = grid if old_grid is None else torch.cat([old_grid[:index], grid.to(old_grid.dtype), old_grid[index:]])
    out[KEY] = pngs
    out["image_grid_thw"] = new_grid
    out["images_seqlens"] = images_seqlens(new_grid)
    return out


def images_seqlens(grid: torch.Tensor) -> torch.Tensor:
    """Patches per image frame, as verl stores them beside `image_grid_thw` (t x h x w rows)."""
    return torch.repeat_interleave(grid[:, 1] * grid[:, 2], grid[:, 0])
