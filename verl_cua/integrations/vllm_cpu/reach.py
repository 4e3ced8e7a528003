"""Reading a sync check: does an engine's output match the trainer's forward, and did it move? (No vLLM import.)"""

from __future__ import annotations

import math
from typing import Any

from verl_cua.integrations.vllm_cpu import SYNC_TOLERANCE as TOLERANCE


def compare(engine: list[dict[str, list]], trainer: list[dict[str, list]]) -> dict[str, Any]:
    """Where the engine and the trainer agree: same greedy tokens, and the largest log-prob gap (nats)."""
    same = all(e["tokens"] == t["greedy"] for e, t in zip(engine, trainer, strict=True))
    gap = max(
        abs(a - b)
        for e, t in zip(engine, trainer, strict=True)
        for a, b in zip(e["logprobs"], t["logprobs"], strict=True)
    )
    return {"same_tokens": same, "max_logprob_gap": gap if math.isfinite(gap) else float("inf")}


def moved(before: list[dict], outputs: list[dict], tolerance: float = TOLERANCE) -> bool:
    """Whether the engine's outputs changed beyond run-to-run noise (a repeat can differ by about 5e-7 nats)."""
    gaps = [abs(a - b) for e, o in zip(before, outputs, strict=True)
            for a, b in zip(e["logprobs"], o["logprobs"], strict=True)]  # fmt: skip
    return any(e["tokens"] != o["tokens"] for e, o in zip(before, outputs, strict=True)) or max(gaps) > tolerance


def weights_reached(
    before: list[dict], outputs: list[dict], vs_update: dict[str, Any], tolerance: float = TOLERANCE
) -> bool:
    """The engine's `outputs` show the update: they match the trainer on the new weights and moved from `before`."""
    return bool(vs_update["same_tokens"] and vs_update["max_logprob_gap"] < tolerance and moved(before, outputs))
