"""verl's FSDP2 engines registered for device `cpu` (imported once `verl.workers.engine.fsdp` is)."""

from __future__ import annotations

from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead


@EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")
class CPUFSDPEngineWithLMHead(FSDPEngineWithLMHead):
    """verl's FSDP2 policy engine, unchanged, on the CPU platform (use `actor.strategy=fsdp2`, sdpa attention)."""


@EngineRegistry.register(model_type="value_model", backend=["fsdp", "fsdp2"], device="cpu")
class CPUFSDPEngineWithValueHead(FSDPEngineWithValueHead):
    """verl's FSDP2 value engine, unchanged, on the CPU platform."""
