"""The actor's attention kernel: verl loads `flash_attention_2` unless told otherwise, and fails without flash-attn.
Where flash-attn 2 is not usable, fall back to PyTorch's `sdpa` (and turn off remove-padding, whose Qwen-VL path
needs flash-attn's variable-length kernel), with one logged line saying so and how to install it.

Usable means what verl and transformers use, not that `import flash_attn` works: flash-attn-4 (which sglang brings)
installs `flash_attn/cute/` alone, so `flash_attn` imports as an empty namespace package; verl's Qwen-VL attention
needs `flash_attn_varlen_func` and its remove-padding `flash_attn.bert_padding`, and transformers'
`is_flash_attn_2_available()` asks for the `flash-attn` distribution (>= 2.3.3) behind the module."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import logging
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from verl_cua.resources import docs_link

if TYPE_CHECKING:  # omegaconf only where a config is changed: the doctor reads flash-attn's state on the core install
    from omegaconf import DictConfig

logger = logging.getLogger(__name__)

FLASH = "flash_attention_2"
FALLBACK = "sdpa"
INSTALL = f"install a flash-attn wheel built for this torch and CUDA (PyPI has none; {docs_link('gpu.md')})"
NEEDED = {  # what verl 0.9.1 imports from flash_attn on CUDA (models/transformers/qwen2_vl.py, attention_utils.py)
    "flash_attn": ("flash_attn_func", "flash_attn_varlen_func"),
    "flash_attn.bert_padding": ("index_first_axis", "pad_input", "unpad_input"),
}
DISTRIBUTION = "flash-attn"  # the distribution transformers' is_flash_attn_2_available() looks for
MIN_VERSION = "2.3.3"  # transformers' floor for flash_attention_2


def flash_attn_error() -> str | None:
    """Why flash-attn 2 cannot be used here (absent, a namespace package without its kernels, a build for another
    torch/CUDA, no `flash-attn` distribution for transformers); None when it can."""
    try:
        module = importlib.import_module("flash_attn")
    except Exception as exc:  # ImportError, or an undefined symbol / OSError from a mismatched build
        return _exc_line(exc)
    owners = _owners()
    if getattr(module, "__file__", None) is None:  # PEP 420: folders named flash_attn, no __init__.py
        source = f" from {', '.join(owners)}" if owners else ""
        return f"flash_attn is a namespace package{source} without flash_attn_varlen_func"
    for name, symbols in NEEDED.items():
        try:
            found = importlib.import_module(name)
        except Exception as exc:
            return f"{name} does not import ({_exc_line(exc)})"
        missing = [symbol for symbol in symbols if not hasattr(found, symbol)]
        if missing:
            return f"{name} lacks {', '.join(missing)}"
    if not any(owner.startswith(f"{DISTRIBUTION} ") for owner in owners):
        return (f"flash_attn imports, but no {DISTRIBUTION} distribution provides it ({', '.join(owners) or 'none'}): "
                "transformers' is_flash_attn_2_available() is False")  # fmt: skip
    version = md.version(DISTRIBUTION)
    try:
        too_old = Version(version) < Version(MIN_VERSION)
    except InvalidVersion:
        too_old = True
    if too_old:
        return f"{DISTRIBUTION} {version} is older than transformers' {MIN_VERSION}"
    return _transformers_error()


def flash_attn_version() -> str | None:
    """The installed `flash-attn` distribution's version, if any."""
    try:
        return md.version(DISTRIBUTION)
    except md.PackageNotFoundError:
        return None


def _owners() -> list[str]:
    """The distributions (`name version`) that install files under the top-level `flash_attn` package."""
    names = md.packages_distributions().get("flash_attn", [])
    out = []
    for name in dict.fromkeys(names):
        try:
            out.append(f"{name.lower().replace('_', '-')} {md.version(name)}")
        except md.PackageNotFoundError:
            continue
    return out


def _transformers_error() -> str | None:
    """transformers' own verdict where it can give one (it needs CUDA); None where it agrees or cannot say."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        from transformers.utils import is_flash_attn_2_available
    except Exception:
        return None
    return None if is_flash_attn_2_available() else "transformers' is_flash_attn_2_available() is False"


def _exc_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def resolve_attention(config: DictConfig) -> str | None:
    """Switch the actor to sdpa (remove-padding off) when it would load flash_attention_2 without flash-attn.

    Returns the warning it logged, or None when nothing changed."""
    from omegaconf import open_dict

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
