"""The planner's and the executor's messages for one step, and the split of a planner reply into thought and answer.

Messages use chat-template content parts (`{"type": "image", "image": ...}`, `{"type": "text", "text": ...}`) as in
`verl_cua.actions.conversation`; images are whatever the caller passes. The history keeps the last
`max_history_steps` steps as assistant turns; only the last `shown_screenshots` screens (the current one counted) keep
their user turn with the screenshot, older user turns are dropped (CODA's layout).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from verl_cua.actions.planner.spec import PlannerSpec

_THOUGHT_HEAD = re.compile(r"\A\s*Thought[ \t]*:[ \t]*")
_FENCE = "```"


@dataclass(frozen=True)
class PlanStep:
    """One past step: the planner's thought, the action the executor carried out (its action text), its screen."""

    thought: str
    executed: str  # what the executor did, as text (its raw action line), not the planner's own discarded action
    screenshot: Any  # the screen the step acted on (opaque: a PIL image, PNG bytes); None for none


@dataclass(frozen=True)
class Plan:
    """A planner reply split: the thought passed on, its own action (None: no Action line), its answer (None: none)."""

    thought: str
    planner_action: str | None
    answer: str | None


@cache
def _marker(action_marker: str) -> re.Pattern[str]:
    """A line that starts with `action_marker` and a colon (spaces allowed around them); any newline ends a line."""
    return re.compile(rf"(?:\A|[\r\n])[ \t]*{re.escape(action_marker)}[ \t]*:")


@cache
def _answer(answer_token: str) -> re.Pattern[str]:
    """The answer token as the action's first word (after an opening code fence and its language tag), repeats
    included (`ANS ANS 5`); elsewhere in the action (`click the ANS button`) it is no answer."""
    token = rf"(?<!\w){re.escape(answer_token)}(?!\w)"
    return re.compile(rf"\A\s*(?:```[ \t]*(?:(?!{token})\w*)?\s*)?{token}(?:\s*{token})*")


def split_plan(text: str, spec: PlannerSpec) -> Plan:
    """Split a planner reply: the thought before the first Action line (a leading `Thought:` removed), the action
    after it, and the answer when that action holds the answer token. Never raises; nothing is evaluated."""
    match = _marker(spec.action_marker).search(text)
    head = text if match is None else text[: match.start()]
    thought = _THOUGHT_HEAD.sub("", head, count=1).strip()
    if match is None:
        return Plan(thought=thought, planner_action=None, answer=None)
    action = text[match.end() :].strip()
    token = _answer(spec.answer_token).match(action)
    answer = None if token is None else _unfence(action[token.end() :])
    return Plan(thought=thought, planner_action=action, answer=answer)


def _unfence(text: str) -> str:
    """`text` stripped, without the code fence around it (an opening one left before the token, a closing one)."""
    text = text.strip()
    if text.startswith(_FENCE):
        text = text[len(_FENCE) :].strip()
    if text.endswith(_FENCE):
        text = text[: -len(_FENCE)].strip()
    return text


def step_reply(step: PlanStep) -> str:
    """A past step's assistant turn: its thought, then the action the executor carried out."""
    return f"{step.thought}\nAction: {step.executed}"


def _user(image: Any, *texts: str) -> dict[str, Any]:
    """A user turn: the image part (when there is one), then the texts."""
    image_part = [] if image is None else [{"type": "image", "image": image}]
    return {"role": "user", "content": [*image_part, *({"type": "text", "text": t} for t in texts)]}


def _history(
    spec: PlannerSpec, instruction: str, steps: list[PlanStep], screenshot: Any, observation_text: str | None = None
) -> list[dict[str, Any]]:
    """The turns after the prompt: the kept steps' replies, the user turns of the last shown screens before them,
    and the current screen's user turn with the observation's text (when given) and the task line."""
    kept = list(steps[max(len(steps) - spec.max_history_steps, 0) :])
    shown_before = max(spec.shown_screenshots - 1, 0)  # past screens shown beside the current one
    first_shown = len(kept) - shown_before
    turns: list[dict[str, Any]] = []
    for i, step in enumerate(kept):
        if i >= first_shown:
            turns.append(_user(step.screenshot, spec.user_text))
        turns.append({"role": "assistant", "content": step_reply(step)})
    current = screenshot if spec.shown_screenshots else None
    read = [f"\n{observation_text}"] if observation_text else []  # its own line: templates join parts as they are
    turns.append(_user(current, spec.user_text, *read, f"{spec.task_prefix}{instruction}"))
    return turns


def planner_messages(
    spec: PlannerSpec, instruction: str, steps: list[PlanStep], screenshot: Any, observation_text: str | None = None
) -> list[dict[str, Any]]:
    """The planner's context: its system prompt, the pruned history, the current `screenshot` with the task line.
    `observation_text`: the current screen's element table or marks (an observation type other than `screenshot`),
    shown to the planner only, before the task line (CODA's planner sees screenshots alone: this is our addition)."""
    system = {"role": "system", "content": spec.planner_system(instruction)}
    return [system, *_history(spec, instruction, steps, screenshot, observation_text)]


def executor_messages(
    spec: PlannerSpec, instruction: str, steps: list[PlanStep], screenshot: Any, thought: str
) -> list[dict[str, Any]]:
    """The executor's context: its prompt as a user turn, the planner's history and screenshots, then an assistant
    turn holding the planner's `thought` and an open `Action: ` for the executor to complete."""
    prompt = {"role": "user", "content": [{"type": "text", "text": spec.executor_text(instruction)}]}
    prefill = {"role": "assistant", "content": f"{thought}\nAction: "}
    return [prompt, *_history(spec, instruction, steps, screenshot), prefill]
