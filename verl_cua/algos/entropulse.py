"""Entropulse (ComputerRL): alternate RL phases with short SFT phases on buffered successes (fixed/entropy schedule)."""

from __future__ import annotations

import math
from typing import Any, Protocol

SCHEDULES = ("none", "fixed", "entropy")


class EntropulseSettings(Protocol):
    """When to pause RL for an SFT phase: never, every rl_steps, or when the entropy EMA falls below ratio x early.
    The trainer passes its validated `cua.entropulse` section (the bounds live there, once)."""

    schedule: str  # one of SCHEDULES
    rl_steps: int
    sft_steps: int
    ratio: float  # in (0, 1]
    ema: float  # in [0, 1)
    early_steps: int
    min_rl_steps: int


class Entropulse:
    """RL/SFT phase state machine: observe() once per RL step says "rl" or "sft"; sft_done() resumes RL."""

    def __init__(self, config: EntropulseSettings) -> None:
        self.config = config
        self._phase = "rl"
        self._phases_completed = 0
        self._total_sft_steps = 0
        self._rl_steps_in_phase = 0
        self._total_rl_steps = 0
        self._ema: float | None = None
        self._early_values: list[float] = []

    @property
    def phase(self) -> str:
        """The current phase: "rl" or "sft"."""
        return self._phase

    @property
    def phases_completed(self) -> int:
        """Number of SFT phases done."""
        return self._phases_completed

    @property
    def total_sft_steps(self) -> int:
        """SFT steps run so far (sft_steps per completed phase)."""
        return self._total_sft_steps

    @property
    def rl_steps_in_phase(self) -> int:
        """RL steps observed in the current RL phase."""
        return self._rl_steps_in_phase

    @property
    def ema_entropy(self) -> float | None:
        """EMA of the policy entropy in the current RL phase, None before the first value."""
        return self._ema

    @property
    def early_entropy(self) -> float | None:
        """Mean entropy of the run's first early_steps RL steps, None until they are seen."""
        if len(self._early_values) < self.config.early_steps:
            return None
        return sum(self._early_values) / len(self._early_values)

    def observe(self, entropy: float | None) -> str:
        """Record one finished RL step's entropy (None or non-finite: unknown); return "rl" or "sft"."""
        if self._phase != "rl":
            raise RuntimeError("Entropulse.observe() called during an SFT phase; call sft_done() first")
        self._rl_steps_in_phase += 1
        self._total_rl_steps += 1
        if entropy is not None and math.isfinite(entropy):
            value = float(entropy)
            self._ema = value if self._ema is None else self.config.ema * self._ema + (1.0 - self.config.ema) * value
            if len(self._early_values) < self.config.early_steps:
                self._early_values.append(value)
        if self._should_pulse():
            self._phase = "sft"
        return self._phase

    def _should_pulse(self) -> bool:
        """Whether the current RL phase should end now."""
        cfg = self.config
        if cfg.schedule == "fixed":
            return self._rl_steps_in_phase >= cfg.rl_steps
        if cfg.schedule == "entropy":
            early = self.early_entropy
            return (
                self._rl_steps_in_phase >= cfg.min_rl_steps
                and early is not None
                and self._ema is not None
                and self._ema < cfg.ratio * early
            )
        return False

    def sft_done(self, entropy_after: float | None = None, steps_run: int | None = None) -> None:
        """End the SFT phase and start a new RL phase; the entropy EMA restarts from entropy_after (else next value).

        `steps_run` (default: sft_steps) is how many SFT steps really ran; a phase that ran none (nothing buffered
        yet) is not counted, but RL still starts a new phase, so the next pulse waits a full RL phase again."""
        if self._phase != "sft":
            raise RuntimeError("Entropulse.sft_done() called outside an SFT phase")
        ran = self.config.sft_steps if steps_run is None else int(steps_run)
        self._phase = "rl"
        self._phases_completed += 1 if ran > 0 else 0
        self._total_sft_steps += ran
        self._rl_steps_in_phase = 0
        finite = entropy_after is not None and math.isfinite(entropy_after)
        self._ema = float(entropy_after) if finite else None

    def metrics(self) -> dict[str, float]:
        """Scalars for the logger under the "entropulse/" prefix."""
        out = {
            "entropulse/phase": 1.0 if self._phase == "sft" else 0.0,
            "entropulse/sft_phases": float(self._phases_completed),
            "entropulse/sft_steps": float(self._total_sft_steps),
            "entropulse/rl_steps_in_phase": float(self._rl_steps_in_phase),
        }
        if self._ema is not None:
            out["entropulse/entropy_ema"] = self._ema
        if self.early_entropy is not None:
            out["entropulse/entropy_early"] = self.early_entropy
        return out

    def state_dict(self) -> dict[str, Any]:
        """Plain-dict snapshot for checkpoints."""
        return {
            "phase": self._phase,
            "phases_completed": self._phases_completed,
            "total_sft_steps": self._total_sft_steps,
            "rl_steps_in_phase": self._rl_steps_in_phase,
            "total_rl_steps": self._total_rl_steps,
            "ema": self._ema,
            "early_values": list(self._early_values),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict snapshot."""
        if state["phase"] not in ("rl", "sft"):
            raise ValueError(f"bad entropulse phase {state['phase']!r} in state")
        self._phase = state["phase"]
        self._phases_completed = int(state["phases_completed"])
        self._total_sft_steps = int(state["total_sft_steps"])
        self._rl_steps_in_phase = int(state["rl_steps_in_phase"])
        self._total_rl_steps = int(state["total_rl_steps"])
        self._ema = None if state["ema"] is None else float(state["ema"])
        self._early_values = [float(v) for v in state["early_values"]]
