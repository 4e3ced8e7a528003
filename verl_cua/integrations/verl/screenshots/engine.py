"""verl's FSDP policy engine on CUDA, expanding compact screenshots (`screenshots.compact`) into `pixel_values` one
micro-batch at a time, just before the forward: the actor update, old/ref log-probs and SDPO's passes alike.
Imported once `verl.workers.engine.fsdp.transformer_impl` is (plugin.py)."""

from __future__ import annotations

from typing import Any

import torch
from verl.utils import tensordict_utils as tu
from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

from verl_cua.integrations.verl.screenshots.cache import ScreenshotCache, budget_bytes, prefetch_enabled
from verl_cua.integrations.verl.screenshots.compact import expand_grids, expand_one, expand_rows, row_pngs


class CompactImagesMixin:
    """`prepare_model_inputs` that first turns PNG screenshots into the processor's `pixel_values`, each screenshot
    once per step on this rank (`ScreenshotCache`; prefetched on a thread with `VERL_CUA_IMAGE_PREFETCH=1`)."""

    def forward_backward_batch(self, data: Any, loss_function: Any, forward_only: bool = False):
        """Start the cache's batch (its screenshots queued when prefetch is on), then verl's own micro-batch loop."""
        cache = self._cua_screenshot_cache()
        if cache is not None:  # a new batch: its screenshots are kept for it; queued when prefetch is on
            wanted = prefetch_enabled() and "multi_modal_inputs" in data.keys()
            cache.prefetch(row_pngs(tu.get(data, "multi_modal_inputs")) if wanted else [])
        return super().forward_backward_batch(data, loss_function, forward_only)

    def prepare_model_inputs(self, micro_batch: Any):
        """Expand the micro-batch's compact rows, then verl's own preparation."""
        if "multi_modal_inputs" not in micro_batch.keys():
            return super().prepare_model_inputs(micro_batch)
        rows = tu.get(micro_batch, "multi_modal_inputs")
        cache = self._cua_screenshot_cache()
        grids = None if cache is None else expand_grids(rows, self._cua_image_processor(), cache)
        if grids is None:  # no cache, or a row with patches of its own: each row expanded, verl concatenates
            expanded = expand_rows(rows, self._cua_image_processor(), cache)
            if expanded is not None:
                tu.assign_non_tensor_stack(micro_batch, "multi_modal_inputs", expanded)
            return super().prepare_model_inputs(micro_batch)
        # the rows go to verl without patches, and the micro-batch's patches are concatenated once, from the cache
        rows, patches = grids
        tu.assign_non_tensor_stack(micro_batch, "multi_modal_inputs", rows)
        model_inputs, output_args = super().prepare_model_inputs(micro_batch)
        if patches:
            model_inputs["pixel_values"] = torch.cat(patches)
        cache.release()
        return model_inputs, output_args

    def _cua_screenshot_cache(self) -> ScreenshotCache | None:
        if not hasattr(self, "_cua_cache"):
            limit = budget_bytes()
            self._cua_cache = None
            if limit > 0:
                processor = self._cua_image_processor
                compute = getattr(self, "_autocast_dtype", None)  # bf16 on the GPU: patches kept at half the bytes
                dtype = compute if compute in (torch.bfloat16, torch.float16) else None
                self._cua_cache = ScreenshotCache(lambda data: expand_one(data, processor()), limit, dtype)
        return self._cua_cache

    def _cua_image_processor(self) -> Any:
        processor = getattr(self, "_cua_processor", None)
        if processor is None:
            processor = getattr(self.model_config, "processor", None) or self.model_config.get_processor()
            if processor is None or getattr(processor, "image_processor", None) is None:
                raise ValueError("rows carry compact screenshots but the model has no image processor")
            self._cua_processor = processor
        return processor.image_processor


@EngineRegistry.register(
    model_type="language_model", backend=["fsdp", "fsdp2"], device="cuda", vendor=["nvidia", "amd"]
)
class CompactImagesFSDPEngine(CompactImagesMixin, FSDPEngineWithLMHead):
    """verl's FSDP/FSDP2 policy engine on NVIDIA/AMD GPUs, for rows with compact screenshots."""
