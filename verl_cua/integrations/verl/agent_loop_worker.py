"""verl's V1 agent-loop worker and manager with compact screenshots: rows go to TransferQueue with their images as
PNG bytes (`cua.env.image_storage=png`, the default) instead of fp32 `pixel_values` (see `screenshots.compact`)."""

from __future__ import annotations

import logging
from typing import Any

import ray
import torch
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ
from verl.utils.tokenizer import get_processor_token_id

from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.screenshots.compact import KEY as PNG_KEY
from verl_cua.integrations.verl.screenshots.compact import compact, image_grid, images_seqlens, png_bytes

logger = logging.getLogger(__name__)

TOKEN_TYPES = "mm_token_type_ids"
# Ray refuses to subclass an actor class; its undecorated class can be.
_WorkerBase = AgentLoopWorkerTQ.__ray_metadata__.modified_class


class CuaAgentLoopWorker(_WorkerBase):
    """`AgentLoopWorkerTQ` whose rows carry PNG screenshots; every other field is verl's own.

    With PNG rows, verl's multi-modal step (decode the row's text, run the whole processor again: tokens, patches,
    grids; ~10 ms a row on a CPU for a 200x160 screenshot) is replaced by what the row keeps and the tokens already
    say: each image's grid, the M-RoPE token types, the PNGs. The first row of each worker is built both ways and
    compared; a model whose processor gives anything else keeps verl's way for the rest of the run."""

    _png_rows: bool | None = None  # cua.env.image_storage == "png", read once
    _fast_rows: bool | None = None  # None until the first row's comparison

    def _compute_multi_modal_inputs(self, output, input_ids) -> dict[str, Any]:
        """verl's processor output (grid, lengths, M-RoPE inputs) with `pixel_values` swapped for the PNGs."""
        data = output.multi_modal_data or {}
        images = data.get("images")
        if self._png_rows is None:
            self._png_rows = image_storage(self.config) == "png"
        only_images = not (data.get("videos") or data.get("audios"))
        if not images or not self._png_rows or not only_images or self._fast_rows is False:
            return self._verl_rows(output, input_ids, images)
        try:
            fast = self._grid_rows(images, input_ids)
        except Exception as exc:  # noqa: BLE001 - a processor we cannot read the grid of: verl's way, from now on
            logger.warning("verl-cua: cannot build PNG rows from grids (%s); using verl's processor pass", exc)
            self._fast_rows = False
            return self._verl_rows(output, input_ids, images)
        if self._fast_rows is None:
            full = self._verl_rows(output, input_ids, images)
            self._fast_rows = same_inputs(full, fast)
            if not self._fast_rows:
                logger.warning("verl-cua: this processor's rows hold more than grids and token types (%s); building "
                               "every row with verl's processor pass", sorted(full))  # fmt: skip
            return full
        return fast

    def _verl_rows(self, output, input_ids, images) -> dict[str, Any]:
        inputs = super()._compute_multi_modal_inputs(output, input_ids)
        if images and "pixel_values" in inputs and self._png_rows:
            return compact(inputs, images)
        return inputs

    def _grid_rows(self, images: list, input_ids: torch.Tensor) -> dict[str, Any]:
        """What a PNG row's multi-modal inputs hold, from the images' sizes and the tokens alone (the token types'
        values do not matter: verl pops them and rebuilds them from the tokens)."""
        grid = torch.cat([image_grid(image, self.processor.image_processor) for image in images])
        types = (input_ids.reshape(1, -1) == get_processor_token_id(self.processor, "image")).long()
        pngs = [png_bytes(image) for image in images]
        return {TOKEN_TYPES: types, "image_grid_thw": grid, "images_seqlens": images_seqlens(grid), PNG_KEY: pngs}


def same_inputs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two rows' multi-modal inputs hold the same keys and equal values (tensors by dtype and value); the
    M-RoPE token types only by presence: verl pops them and rebuilds them from the tokens before they are used."""
    if set(a) != set(b):
        return False
    for key, value in a.items():
        other = b[key]
        if key == TOKEN_TYPES:
            continue
        if isinstance(value, torch.Tensor):
            if not isinstance(other, torch.Tensor) or value.dtype != other.dtype or not torch.equal(value, other):
                return False
        elif value != other:
            return False
    return True


def image_storage(config: Any) -> str:
    """`cua.env.image_storage` of a trainer config (its default, png, when the config has no `cua`)."""
    return CuaConfig.from_mapping(config.get("cua")).env.image_storage


class CuaAgentLoopManager(AgentLoopManagerTQ):
    """`AgentLoopManagerTQ` starting `CuaAgentLoopWorker`s."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = ray.remote(CuaAgentLoopWorker)  # AgentLoopManagerTQ sets its own first
