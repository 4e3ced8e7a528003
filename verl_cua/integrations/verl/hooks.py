"""What an algorithm folder (`sdpo/`, `gigpo/`, `coso/`) plugs into the spine: one `StepHook`, exported as the folder's
`HOOK`. The estimator plan picks the hooks a run uses (`plan.hooks`); the trainer runs their `apply` after verl's
estimator, in order; the config checks read each hook's section; the agent loop builds each hook's `TurnHook` (a
per-token signal computed beside the response mask) once per episode.

A folder's `__init__` declares its hook and imports neither torch nor verl: the doctor, the config checks and the
budget read hooks before Ray starts, and the step itself is imported at its first `apply`. Our estimators name their
hook in `verl_cua.algos.estimators` (`step_advantage`); the add-ons below run beside any estimator with PPO's loss."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

ADD_ONS = ("coso",)  # hooks beside any PPO-loss estimator, each on when its section's `enable` is true


def _resolve(target: str) -> Any:
    """The object a "module:name" string names (imported now)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class StepHook:
    """One algorithm's part of the advantage step: on verl's batch right after its estimator ran."""

    name: str  # the folder integrations/verl/<name>/, and the prefix of its metrics
    section: str | None  # its `cua` section (None: it has no settings); settings set there need this hook to run
    step: str  # "module:function" of `apply(data, step) -> metrics` (imported at its first call)
    teacher_pass: bool = False  # SDPO's teacher pass must run before it (the trainer runs it)
    row_fields: tuple[str, ...] = ()  # the per-row fields it writes onto the batch for the actor loss
    loss: str | None = None  # "module:function" of a term it adds to PPO's loss on the workers (`add_loss_term`)
    entropy: bool = False  # its loss term reads the update's per-token entropy (actor.calculate_entropy)
    turns: str | None = None  # "module:Class" of its `TurnHook` in the agent loop, built per episode

    def settings(self, cua: Any) -> Any:
        """This hook's section of the typed `cua` config (None for a hook without settings)."""
        return None if self.section is None else cua[self.section]

    def apply(self, data: Any, step: Any) -> dict[str, float]:
        """This hook's advantage step on verl's `data` (in place) for the trainer's `AdvantageStep`; its metrics."""
        return _resolve(self.step)(data, step)

    def add_loss_term(self, section: Any, config: Any, model_output: Any, data: Any, loss: Any, metrics: dict) -> Any:
        """PPO's `loss` on a worker with this hook's term added (its metrics into `metrics`); `loss` unchanged when
        the hook has no term."""
        if self.loss is None:
            return loss
        return _resolve(self.loss)(config, model_output, data, section, loss, metrics)

    def turn_hook(self, section: Any, context: TurnContext) -> TurnHook | None:
        """A fresh `TurnHook` for one episode (None when the hook has none)."""
        return None if self.turns is None else _resolve(self.turns)(section, context)


def step_hook(name: str) -> StepHook:
    """The `HOOK` of `integrations/verl/<name>/`; a one-line error when that folder exports none."""
    package = f"{__package__}.{name}"
    try:
        hook = getattr(importlib.import_module(package), "HOOK", None)
    except ModuleNotFoundError as exc:
        if exc.name != package:  # the folder exists and lacks something it imports: that is its own error
            raise
        hook = None
    if not isinstance(hook, StepHook):
        from verl_cua.algos.estimators import step_advantages

        valid = ", ".join(sorted({*step_advantages(), *ADD_ONS}))
        raise ValueError(f"{package} exports no StepHook as HOOK: no step hook {name!r}; valid: {valid}")
    return hook


@dataclass(frozen=True)
class TurnContext:
    """What a turn hook may use of its agent loop."""

    tokenizer: Any
    format: str  # cua.action.format: how the turn's reply is parsed
    response_length: int  # a row's response budget (a step row's response is cut to it)
    clean: Callable[[str], str]  # the loop's reply cleaning (special-token strings out), as its actions are parsed
    align: Callable[..., tuple[list[int], list[float] | None]]  # verl's continuous-token `align_response_metadata`


class TurnHook(Protocol):
    """A per-token signal of one episode, kept aligned with the response mask as the agent loop builds it."""

    def on_turn(
        self, token_ids: list[int], screen: tuple[int, int], image_size: tuple[int, int], marks: dict | None = None
    ) -> None:
        """One model turn generated `token_ids` on a `screen` shown at `image_size` (with its set-of-marks `marks`)."""

    def on_merge(self, merged: Any, mask: list[int]) -> None:
        """An episode row's tokens were merged (verl's `MergeResult`) onto a response whose mask was `mask`."""

    def fields(self, row: int | None) -> dict[str, Any]:
        """The extra fields of the episode's row (`row=None`) or of its `row`-th step row."""
