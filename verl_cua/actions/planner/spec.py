"""What a planner-executor agent (CODA, arXiv 2508.20096) shows each model, and its limits, in one record by name.

The trained planner writes a `Thought:`; a frozen UI-TARS-1.5 executor turns that thought and the screenshots into one
grounded action. Every fact of the setup lives in a `PlannerSpec`; `verl_cua.actions.planner.context` reads it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from verl_cua.registry import Registry

_CODA_PLANNER_PROMPT = """You are an agent that operates a computer's graphical interface. You get a task, the actions \
taken so far and screenshots of the screen. Decide the single next step that brings the task closer to done.

## Output Format
```
Thought: ...
Action: ...
```

## Example
Thought: The search field at the top of the window is where the query goes, so I click it to focus it.
Action: click(start_box='(116,58,197,90)')

## Note
- Write the Thought in the same language as the task.
- In the Thought, name the element you act on and the action you take on it, so anyone can find and do it.
- Before typing into a field, clear what it already holds.
- When the task asks a question, reply in the Action as `ANS your_answer`.

## User Instruction
{instruction}"""

_CODA_EXECUTOR_PROMPT = """You are an agent that operates a computer's graphical interface. You get a task, your \
earlier actions and screenshots. Carry out the next action of the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space
click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='')
type(content='') # end `content` with "\\n" to submit what you typed.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() # pause 5 seconds, then look at a new screenshot.
finished()
call_user() # when the task cannot go on without a person, or needs their help.

## Note
- Write the Thought in {language}.
- In the Thought, sketch a short plan, then sum up the next action in one sentence.

## User Instruction
{instruction}"""


@dataclass(frozen=True)
class PlannerSpec:
    """One planner-executor setup: the planner's prompt and context window, how its reply splits, the executor's."""

    name: str  # the registry name (`get_planner_spec`)
    planner_prompt: str  # the planner's system prompt; `{instruction}` is where the task goes
    user_text: str  # each user turn's text, beside that step's screenshot
    executor_prompt: str  # the executor's prompt, sent as its first user message; `{instruction}`, `{language}` slots
    task_prefix: str = "\nTask: "  # the last user turn's extra text part (templates join parts as they are)
    max_history_steps: int = 15  # past steps kept in context at most (older ones are dropped)
    shown_screenshots: int = 2  # screenshots in context, the current one counted (older user turns are dropped)
    action_marker: str = "Action"  # the line head (`Action:`) that ends the planner's thought
    answer_token: str = "ANS"  # in the planner's Action: what follows is the task's answer, the executor is skipped
    executor_format: str = "uitars"  # the action format the executor writes (`verl_cua.actions.formats`)
    executor_language: str = "English"  # the language the executor's prompt asks its Thought in
    executor_screen: tuple[int, int] = (1280, 800)  # the screen size the executor assumes (width, height)
    executor_factor: int = 1000  # the executor's coordinate range: UI-TARS points run 0..factor on each axis
    max_steps: int | None = None  # steps per episode; None: each task's own limit (CODA takes it from the task)

    def __post_init__(self) -> None:
        for field in ("planner_prompt", "executor_prompt"):
            if "{instruction}" not in getattr(self, field):
                raise ValueError(f"planner spec {self.name!r}: {field} needs an {{instruction}} slot for the task")
        if self.max_history_steps < 0 or self.shown_screenshots < 0:
            raise ValueError(
                f"planner spec {self.name!r}: max_history_steps and shown_screenshots must be >= 0, got "
                f"{self.max_history_steps} and {self.shown_screenshots}"
            )
        if not self.action_marker.strip() or not self.answer_token.strip():
            raise ValueError(f"planner spec {self.name!r}: action_marker and answer_token must not be blank")

    @property
    def origin(self) -> str:
        """What the registry names this spec by: its name and a digest of its fields (`verl_cua.registry`), so two
        specs under one name are one registration only when they are equal."""
        digest = hashlib.sha256(repr(self).encode()).hexdigest()[:8]
        return f"<planner spec {self.name!r} {digest}>"

    def planner_system(self, instruction: str) -> str:
        """The planner's system prompt for `instruction` (plain substitution: braces in the task are kept as is)."""
        return self.planner_prompt.replace("{instruction}", instruction)

    def executor_text(self, instruction: str) -> str:
        """The executor's prompt for `instruction`, in `executor_language`."""
        return self.executor_prompt.replace("{language}", self.executor_language).replace("{instruction}", instruction)


PLANNER_SPECS: Registry[PlannerSpec] = Registry("planner spec", "planner specs")


def register_planner_spec(spec: PlannerSpec) -> PlannerSpec:
    """Register `spec` under its name; another spec under a taken name raises ValueError (one line)."""
    return PLANNER_SPECS.add(spec.name, spec)


def get_planner_spec(name: str) -> PlannerSpec:
    """The spec registered as `name`; an unknown name raises ValueError naming the valid ones."""
    return PLANNER_SPECS.lookup(name)


CODA = register_planner_spec(
    PlannerSpec(
        name="coda",
        planner_prompt=_CODA_PLANNER_PROMPT,
        user_text="Here is the current screenshot. What is the next step you take to move the task forward?",
        executor_prompt=_CODA_EXECUTOR_PROMPT,
    )
)
PLANNER_SPECS.mark_built_in()
