"""Trainer parameter names -> the `hf` rollout model's keys (wrapper prefixes, legacy Qwen-VL layout, LoRA)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# Wrapper prefixes a trainer's parameter names may carry (FSDP1, activation checkpointing, torch.compile, DDP).
WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.", "module.")
# transformers<5 checkpoint layout of Qwen-VL models -> the live transformers 5 layout.
LEGACY_PREFIXES = (("model.", "model.language_model."), ("visual.", "model.visual."))
BASE_LAYER = ".base_layer"


def strip_wrappers(name: str) -> str:
    """`name` without FSDP/checkpointing/compile/DDP wrapper segments."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def _base_layer_variants(name: str) -> Iterator[str]:
    """`name`, then with its LoRA `.base_layer` segment toggled (verl names a LoRA-targeted base weight with one)."""
    yield name
    if BASE_LAYER + "." in name:
        yield name.replace(BASE_LAYER + ".", ".", 1)
    elif "." in name:
        module, leaf = name.rsplit(".", 1)
        yield f"{module}{BASE_LAYER}.{leaf}"


def normalize_param_name(name: str, known: Mapping[str, Any]) -> str | None:
    """Map a trainer parameter name onto a key of `known` (strips wrapper prefixes, maps the legacy VL layout,
    toggles a LoRA `.base_layer` segment)."""
    for candidate in _base_layer_variants(strip_wrappers(name)):
        if candidate in known:
            return candidate
        for old, new in LEGACY_PREFIXES:
            if candidate.startswith(old) and not candidate.startswith(new) and new + candidate[len(old) :] in known:
                return new + candidate[len(old) :]
    return None
