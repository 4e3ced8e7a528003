"""The actor's attention kernel: verl loads `flash_attention_2` unless told otherwise, and fails without flash-attn.
Where flash-attn cannot be imported, fall back to PyTorch's `sdpa` (and turn off remove-padding, whose Qwen-VL
path needs flash-attn's variable-length kernel), with one logged line saying so and how to install it."""

from __future__ import annotations

import importlib
import logging

from omegaconf import DictConfig, open_dict

logger = logging.getLogger(__name__)

FLASH = "flash_attention_2"
FALLBACK = "sdpa"
INSTALL = "install a flash-attn wheel built for this torch and CUDA (PyPI has none; docs/gpu.md)"


def flash_attn_error() -> str | None:
    """Why flash-attn cannot be used here (not installed, or a build for another torch/CUDA); None when it can."""
    try:
        importlib.import_module("flash_attn")
    except Exception as exc:  # ImportError, or an undefined symbol / OSError from a mismatched build
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    return None


def resolve_attention(config: DictConfig) -> str | None:
    """Switch the actor to sdpa (remove-padding off) when it would load flash_attention_2 without flash-attn.

    Returns the warning it logged, or None when nothing changed."""
    model = config.actor_rollout_ref.model
    wanted = (model.get("override_config") or {}).get("attn_implementation", FLASH)
    if wanted != FLASH:
        return None
    error = flash_attn_error()
    if error is None:
        return None
    with open_dict(model):
        if model.get("override_config") is None:
            model.override_config = {}
        model.override_config.attn_implementation = FALLBACK
        model.use_remove_padding = False
    message = (
        f"flash-attn is not usable ({error}): the actor uses attn_implementation={FALLBACK} with "
        f"use_remove_padding=false (slower, more memory on long rows); for flash-attn: {INSTALL}"
    )
    logger.warning(message)
    return message
