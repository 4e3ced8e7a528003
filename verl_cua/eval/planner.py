"""`verl-cua eval --planner`: CODA's planner-executor agent on eval's envs, one step's decision. The planner's reply is
split (`split_plan`); its `ANS` answer ends the episode without an executor call, else the executor turns the thought
and the screenshots into the action. The rules are the training loop's (`integrations/verl/planner/loop.py`):

* an executor that is down, slow or answering garbage (`ExecutorUnavailable` retryable, or an executor's own error)
  is infra: the episode is an infra failure, retried and counted apart, never the planner's failure;
* one that rejects the request the planner's text made (`rejected`, a 4xx) is the planner's invalid step;
* a `fatal` one (bad URL, model or key) stops the run; so do `GIVE_UP_AFTER` infra failures in a row (all workers
  together), as a down chat endpoint does;
* the planner's history shows the executor's action line, never the planner's own action, and it and a rejection's
  cause lose their chat-template special-token strings first (`plain_text`), as the training loop's do.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from verl_cua.actions import parse_action
from verl_cua.actions.planner import Plan, PlannerSpec, PlanStep, executor_messages
from verl_cua.actions.types import GUIAction, ParsedAction
from verl_cua.eval.endpoint import GIVE_UP_AFTER
from verl_cua.eval.executor import Executor, ExecutorUnavailable

# A chat template's special-token string: `<|im_start|>`, `<|im_end|>`, `<|image_pad|>`, `<|box_start|>`...
_SPECIAL = re.compile(r"<\|[A-Za-z0-9_]+\|>")
# Qwen's added tokens of that shape that are not special: its tokenizer keeps them, so the training loop does too
_PLAIN_ADDED = frozenset(
    {"<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}
)
EXECUTOR_FLAGS = "--executor-base-url, --executor-model and --executor-api-key-env"
COUNT_KEYS = ("executor_calls", "executor_failures", "executor_rejected", "planner_answers")  # result.json, summed


class ExecutorDown(RuntimeError):
    """The executor is unusable for good (fatal, or failing call after call): the run stops (`RunAborted`)."""


@dataclass(frozen=True)
class ExecutorView:
    """What the executor may read beside the screenshots (here and in the training loop): the screen, the image size its
    reply is parsed against, and the screen's elements where the env or the recording has them (only the grounding
    stand-in reads those; a model executor sees the screenshots alone)."""

    screen: tuple[int, int]
    image_size: tuple[int, int]
    extra: dict[str, Any]


@dataclass
class Decision:
    """One step's action: `parsed` (None: the executor failed, infra), the history line `executed`, and the step's
    `executor` record for the trajectory."""

    parsed: ParsedAction | None
    executed: str
    record: dict[str, Any]
    seconds: float = 0.0
    messages: list[dict[str, Any]] | None = None  # what the executor was sent (None: not called)


class PlannerRun:
    """The planner spec, the run's executor (shared by every worker) and its failures in a row."""

    def __init__(self, spec: PlannerSpec, executor: Executor, give_up_after: int = GIVE_UP_AFTER):
        self.spec = spec
        self.executor = executor
        self.format = executor.settings.format
        self.give_up_after = give_up_after
        self._failures = 0
        self._lock = threading.Lock()

    def decide(self, plan: Plan, instruction: str, steps: list[PlanStep], shot: Any, view: ExecutorView) -> Decision:
        """The planner's answer, or the executor's action for the plan's thought (see the module docstring)."""
        s = self.executor.settings
        base = {"kind": s.kind, "model": s.model if s.kind == "openai" else None}
        if plan.answer is not None:
            record = {**base, "outcome": "answer", "executed": f"{self.spec.answer_token} {plan.answer}"}
            return Decision(answer_action(plan.thought, plan.answer), record["executed"], record)
        messages = executor_messages(self.spec, instruction, steps, shot, plan.thought)
        try:
            reply = self.executor.act(messages, view)
        except ExecutorUnavailable as exc:
            if exc.kind == "fatal":
                raise ExecutorDown(f"executor: {exc}; check {EXECUTOR_FLAGS}") from None
            if exc.kind == "rejected":  # it refused the request the planner's text made: the planner's failure
                self._answered()
                cause = plain_text(exc.cause)  # it enters later planner prompts
                error = f"the executor rejected the plan: {cause}"
                record = {**base, "outcome": "rejected", "executed": f"(rejected: {cause})", "error": error}
                invalid = ParsedAction(valid=False, error=error, thought=plan.thought, format="planner")
                return Decision(invalid, record["executed"], record, messages=messages)
            return self._unavailable(base, f"executor: {exc}", messages)
        except Exception as exc:  # the executor's own bug (a stand-in's, a client's): ours, never the planner's
            return self._unavailable(base, f"executor: {type(exc).__name__}: {exc}", messages)
        self._answered()
        parsed = parse_action(reply.text, format=self.format, screen=view.screen, image=view.image_size)
        parsed.thought = plan.thought
        executed = plain_text(action_line(reply.text))  # it enters later planner prompts: special tokens out
        record = {**base, "outcome": "action", "raw": reply.raw, "executed": executed, "seconds": reply.seconds,
                  "attempts": reply.attempts}  # fmt: skip
        return Decision(parsed, executed, record, reply.seconds, messages)

    def _answered(self) -> None:
        with self._lock:
            self._failures = 0

    def _unavailable(self, base: dict[str, Any], error: str, messages: list[dict[str, Any]]) -> Decision:
        with self._lock:
            self._failures += 1
            failures = self._failures
        if failures >= self.give_up_after:
            raise ExecutorDown(
                f"{error} ({failures} failed executor calls in a row; giving up: check {EXECUTOR_FLAGS})"
            )
        return Decision(None, "", {**base, "outcome": "unavailable", "error": error}, messages=messages)

    def close(self) -> None:
        """Release the executor's connections."""
        self.executor.close()


def answer_action(thought: str, answer: str) -> ParsedAction:
    """CODA's `ANS` bypass: the planner's answer ends the episode as `done` with that text; no executor call."""
    return ParsedAction(valid=True, actions=[GUIAction("done", text=answer)], thought=thought, format="planner")


def action_line(reply: str) -> str:
    """The executor's action as the planner's history shows it: the text after its last `Action:` (all of it when
    there is none), on one line."""
    head, sep, tail = reply.rpartition("Action:")
    return " ".join((tail if sep else head).split())


def plain_text(text: str) -> str:
    """`text` without chat-template special-token strings (`<|im_end|>`, `<|box_start|>`...), as the training loop's
    `plain_reply` takes out a Qwen planner tokenizer's specials; eval has no tokenizer, so a pattern stands in."""
    previous = None
    while previous != text:  # until none is left: a removal can join two halves of another
        previous = text
        text = _SPECIAL.sub(lambda m: m[0] if m[0] in _PLAIN_ADDED else "", text)
    return text
