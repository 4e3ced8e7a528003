"""The doctor's `model` finding: whether `actor_rollout_ref.model.path` resolves before any worker loads it (a local
folder, the Hugging Face cache, or a hub that answers in a bounded wait; `verl_cua.model_source` decides)."""

from __future__ import annotations

from verl_cua.doctor.finding import Finding
from verl_cua.model_source import HUB_TIMEOUT, resolve_model


def model_finding(path: str, *, timeout: float = HUB_TIMEOUT) -> Finding:
    """The `model` finding for `path`: ok when it resolves, FAIL in one line (with the fix) when it cannot."""
    source = resolve_model(path, timeout=timeout)
    return Finding(source.level, "model", source.detail)
