"""A vLLM general plug-in for vLLM's CPU platform: linear layers keep their weight and run `F.linear` on it.

vLLM-CPU packs each linear weight into a oneDNN handle after loading, and empties `layer.weight`. verl's weight
sync then loads into empty parameters and fails; where the weight is kept (embeddings, lm_head) the load succeeds
but the packed copy keeps the start-up weights, silently. Live weights make every sync reach every matmul, at the
cost of oneDNN's speed, which tiny test models do not need. Upstream, a re-pack after `load_weights` would keep both.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)
_DONE = False


def keep_weights_live(layer, remove_weight: bool) -> None:
    """Replaces vLLM's CPU GEMM dispatch: 2-D weights stay in place and are used by `F.linear` at each call."""
    import torch

    if layer.weight.ndim != 2:
        return _ORIGINAL(layer, remove_weight)
    layer.cpu_linear = torch.nn.functional.linear


_ORIGINAL = None


def register() -> None:
    """vLLM's `vllm.general_plugins` entry: on the CPU platform only, install `keep_weights_live` (idempotent)."""
    global _DONE, _ORIGINAL
    if _DONE:
        return
    _DONE = True
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.model_executor.layers import utils

    _ORIGINAL = utils.dispatch_cpu_unquantized_gemm
    utils.dispatch_cpu_unquantized_gemm = keep_weights_live
    logger.info("verl-cua: vLLM-CPU linear layers keep live weights (weight syncs reach them)")
