"""verl's FSDP2 engines registered for device `cpu` (imported once `verl.workers.engine.fsdp` is)."""

from __future__ import annotations

import contextlib

from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp import transformer_impl
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

from verl_cua.integrations.verl.screenshots.engine import CompactImagesMixin


@contextlib.contextmanager
def _unpinned_offload():
    """verl wraps a forward-only model (the reference policy) in `CPUOffloadPolicy(pin_memory=True)`, and pinning
    needs a CUDA driver: on the CPU the same policy, unpinned (the parameters already live in host memory)."""
    pinned = transformer_impl.CPUOffloadPolicy

    def unpinned(*args, **kwargs):
        return pinned(*args, **{**kwargs, "pin_memory": False})

    transformer_impl.CPUOffloadPolicy = unpinned
    try:
        yield
    finally:
        transformer_impl.CPUOffloadPolicy = pinned


@EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")
class CPUFSDPEngineWithLMHead(CompactImagesMixin, FSDPEngineWithLMHead):
    """verl's FSDP2 policy engine on the CPU platform (use `actor.strategy=fsdp2`, sdpa attention), expanding compact
    screenshots; a reference policy (KL loss) builds with an unpinned offload policy."""

    def _build_fsdp_module(self, *args, **kwargs):
        with _unpinned_offload():
            return super()._build_fsdp_module(*args, **kwargs)


@EngineRegistry.register(model_type="value_model", backend=["fsdp", "fsdp2"], device="cpu")
class CPUFSDPEngineWithValueHead(FSDPEngineWithValueHead):
    """verl's FSDP2 value engine on the CPU platform."""

    def _build_fsdp_module(self, *args, **kwargs):
        with _unpinned_offload():
            return super()._build_fsdp_module(*args, **kwargs)
