"""verl 0.9.1's Qwen2-VL / Qwen2.5-VL input embeddings for a micro-batch without any image, under transformers 5.

For a micro-batch with no image and no video, verl's `_get_input_embeds` (verl/models/transformers/qwen2_vl.py)
runs the vision tower on 16 dummy patches and adds `0.0 * output.mean()`, so that the tower takes part in every
forward (FSDP needs every rank to use the same parameters). Under transformers 5 the tower returns a
`BaseModelOutputWithPooling`, not a tensor, and that `.mean()` raises AttributeError: a micro-batch made only of infra
rows (a dead browser or desktop: one prompt token, no screenshot) or of any text-only rows kills the training run. Its
image and video branches, and the Qwen3-VL path, already unpack the output with verl's `unpack_visual_output`.

`install` wraps verl's function: with no image and no video, `model.visual` answers for the length of the call
with `unpack_visual_output(output)[0]` (a forward hook), the tensor verl's dummy branch expects; with an image it
calls verl's function untouched. It installs only when a probe shows verl's function still crashes on such an output,
so once verl unpacks there (whichever way) the plug-in leaves verl's function as it is.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Callable, Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

logger = logging.getLogger(__name__)

QWEN2_VL_MODULE = "verl.models.transformers.qwen2_vl"
FUNCTION = "_get_input_embeds"
IMAGE_ARGUMENTS = ("pixel_values", "pixel_values_videos")


def tower_output_as_tensor(_module: torch.nn.Module, _args: Any, output: Any) -> torch.Tensor:
    """Forward hook: a vision tower's output (an output object under transformers 5) as its embeddings tensor."""
    from verl.utils.transformers_compat import unpack_visual_output

    return unpack_visual_output(output)[0]


@contextlib.contextmanager
def visual_returns_tensor(model: torch.nn.Module) -> Iterator[None]:
    """While inside, `model.visual(...)` returns the embeddings tensor instead of transformers 5's output object."""
    handle = model.visual.register_forward_hook(tower_output_as_tensor)
    try:
        yield
    finally:
        handle.remove()


def has_images(signature: inspect.Signature, args: tuple, kwargs: dict) -> bool:
    """Whether a call of verl's `_get_input_embeds` carries pixel values of an image or a video."""
    bound = signature.bind_partial(*args, **kwargs).arguments
    return any(bound.get(name) is not None for name in IMAGE_ARGUMENTS)


def with_visual_output_unpacked(get_input_embeds: Callable[..., Any]) -> Callable[..., Any]:
    """verl's `_get_input_embeds`, whose no-image branch gets the vision tower's output as a tensor."""
    signature = inspect.signature(get_input_embeds)

    @functools.wraps(get_input_embeds)
    def get_input_embeds_unpacked(model: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if has_images(signature, (model, *args), kwargs):
            return get_input_embeds(model, *args, **kwargs)
        with visual_returns_tensor(model):
            return get_input_embeds(model, *args, **kwargs)

    get_input_embeds_unpacked.verl_cua_unpacks_visual_output = True
    return get_input_embeds_unpacked


class _ProbeTower(torch.nn.Module):
    """A vision tower that answers as transformers 5's do: an output object holding the embeddings."""

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor | None = None) -> Any:
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        return BaseModelOutputWithPooling(last_hidden_state=pixel_values, pooler_output=pixel_values[:4])


class _ProbeModel(torch.nn.Module):
    """The least of a Qwen2-VL model that verl's `_get_input_embeds` reads in its no-image branch."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(2, 2)
        self.visual = _ProbeTower()
        vision = SimpleNamespace(in_channels=1, temporal_patch_size=1, patch_size=1)
        self.config = SimpleNamespace(vision_config=vision, image_token_id=1, video_token_id=1)

    def get_input_embeddings(self) -> torch.nn.Module:
        """The token embeddings, as a transformers model exposes them."""
        return self.embed_tokens


def crashes_without_images(get_input_embeds: Callable[..., Any]) -> bool:
    """Whether `get_input_embeds` fails on a text-only batch because the tower returned an object, not a tensor."""
    try:
        with torch.no_grad():
            get_input_embeds(_ProbeModel(), torch.zeros((1, 2), dtype=torch.long))
    except AttributeError:
        return True
    except Exception as error:  # a changed verl: leave its function alone, say so once
        logger.warning("verl-cua: could not probe verl's %s (%s); left as it is", FUNCTION, error)
    return False


def install(module: ModuleType) -> None:
    """Wrap `module._get_input_embeds` (verl's Qwen2-VL module) if it still crashes on a batch without images."""
    original = getattr(module, FUNCTION, None)
    if original is None or getattr(original, "verl_cua_unpacks_visual_output", False):
        return
    if crashes_without_images(original):
        setattr(module, FUNCTION, with_visual_output_unpacked(original))
