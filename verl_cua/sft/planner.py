"""CODA Stage 2: planner-mode trajectories become one SFT row per step for a fresh planner (`verl-cua sft-data
--planner coda`).

A planner-mode episode records per step the planner's thought and the action the executor carried out. A training
trace (`gui_agent` with `cua.planner.mode=online`) writes them as its model text, `"{thought}\\nAction: {executed}"`:
the planner's own action line is discarded before the trace, as CODA discards it (an `ANS` answer is kept: it is the
executed action). An eval run (`verl-cua eval --planner coda`) keeps the planner's raw reply as its model text, its
own action included; there the thought is the parsed action's and the executed action the `executor` record's.

A row per kept step: the prompt is `planner_messages` at that step (the system prompt, the earlier steps as text, the
previous and the current screenshot, the step's element table or marks where it read one, the `Task:` line), the
target the step's reply as the planner's context shows its past replies (`step_reply`: the thought, then `\\nAction: `
and the executed action). That is the form of every assistant turn in the row, so verl's SFT dataset, which trains
every assistant turn, trains one form only. Invalid steps (an action the executor could not give, a plan it rejected)
are no target but stay in the later prompts' history, as the planner saw them; a step with no thought is no target
either. Action lines are the runs' own text, never re-rendered: `--format` names the executor's format they are
written in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from verl_cua.actions.conversation import model_image_size
from verl_cua.actions.planner import PlannerSpec, PlanStep, get_planner_spec, planner_messages, split_plan, step_reply
from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.sft.episodes import Candidate, Step, episode_reward, load_screenshot, task_names
from verl_cua.sft.recorded_states import action_text

ANSWER_FORMAT = "planner"  # the parsed format of an `ANS` answer and of a plan the executor rejected
TARGET = "{thought}\\nAction: {executed action}"  # the card's words for the target text


class PlannerConfig(Protocol):
    """What planner rows read of `SFTDataConfig` (`verl_cua.sft.data`, which imports this module)."""

    planner: str | None
    format: str
    max_pixels: int


@dataclass
class PlannerCandidate(Candidate):
    """A selected planner-mode episode: every recorded step as the planner's history holds it, and which are kept."""

    plan: list[PlanStep] = field(default_factory=list)  # every recorded step, screenshots resized for the target
    kept: list[int] = field(default_factory=list)  # indices into `plan` of the steps in `steps` (the targets)


def recorded_plan(line: dict[str, Any], spec: PlannerSpec) -> tuple[str, str]:
    """(thought, executed action text) of a planner-mode trajectory line. An eval run's line (it has an `executor`
    record, whose `executed` is the executor's action line, a rejection or the `ANS` answer; none when the executor
    failed) gives the parsed action's thought and that. A training trace's model text is the step's history turn
    (`step_reply`), split after the recorded thought; a line without the thought (a rejected plan) is split as a
    planner reply (`split_plan`), its action text read from the parsed action when it has no Action line."""
    text = str(line.get("model_text") or "")
    recorded = (line.get("action") or {}).get("thought")
    executor = line.get("executor")
    if isinstance(executor, dict):  # an eval run's: model_text is the planner's raw reply, its own action included
        thought = split_plan(text, spec).thought if recorded is None else str(recorded)
        return thought, str(executor.get("executed") or "")
    head = None if recorded is None else step_reply(PlanStep(thought=str(recorded), executed="", screenshot=None))
    if head is not None and text.startswith(head):
        return str(recorded), text[len(head) :]
    plan = split_plan(text, spec)
    return plan.thought, plan.planner_action if plan.planner_action is not None else action_text(line)


def convert_planner(
    run: str, meta: dict[str, Any], record: EpisodeRecord, config: PlannerConfig, processor: Any
) -> PlannerCandidate | str:
    """`record` as planner rows' material, or the reason it cannot be (a missing screenshot, another action format)."""
    spec = get_planner_spec(config.planner)
    result = record.result or {}
    screen = tuple(int(v) for v in record.steps[0].get("screen") or ())
    if len(screen) != 2:
        return "no screen size"
    image_size = model_image_size(processor, screen, config.max_pixels)
    plan: list[PlanStep] = []
    steps, kept, negatives = [], [], []
    for line in record.steps:
        written = (line.get("action") or {}).get("format")
        if written not in (None, config.format, ANSWER_FORMAT):
            return f"action lines in {written}, not --format {config.format}"
        shot = load_screenshot(record.dir / str(line.get("screenshot")), image_size)
        if shot is None:
            return "a screenshot is missing"
        thought, executed = recorded_plan(line, spec)
        plan.append(PlanStep(thought=thought, executed=executed, screenshot=shot))
        if not line.get("valid") or not thought:
            error = (line.get("error") or "no action") if not line.get("valid") else "no thought"
            negatives.append({"text": line.get("model_text") or "", "error": error, "after": len(steps),
                              "step": line.get("step", len(plan))})  # fmt: skip
            continue
        kept.append(len(plan) - 1)
        steps.append(Step(shot, step_reply(plan[-1]), read=line.get("elements_text") or None))  # the table it read
    if not steps:
        return "no valid steps"
    instance, group = task_names(result, record.key)
    return PlannerCandidate(
        run=run,
        key=record.key,
        task=instance,
        group=group,
        source_model=str(result.get("model") or meta.get("model") or "unknown"),
        source_format=f"planner:{spec.name}",
        instruction=str(result.get("instruction") or ""),
        screen=screen,
        reward=episode_reward(result),
        steps=steps,
        negatives=negatives,
        fingerprint=_fingerprint(plan),
        plan=plan,
        kept=kept,
    )


def planner_rows(candidate: PlannerCandidate, spec: PlannerSpec) -> list[list[dict[str, Any]]]:
    """One row per kept step: the planner's context at that step (`planner_messages`, with the element table or marks
    the step read), then its reply."""
    rows = []
    for index, step in zip(candidate.kept, candidate.steps, strict=True):
        prompt = planner_messages(spec, candidate.instruction, candidate.plan[:index], step.image, step.read)
        rows.append([*prompt, {"role": "assistant", "content": step.text}])
    return rows


def planner_card(config: PlannerConfig) -> dict[str, Any]:
    """What the card says of a planner dataset: the spec, its context window and the target text."""
    spec = get_planner_spec(config.planner)
    return {
        "spec": spec.name,
        "target": TARGET,
        "shown_screenshots": spec.shown_screenshots,
        "max_history_steps": spec.max_history_steps,
        "action_format": config.format,
    }


def _fingerprint(plan: list[PlanStep]) -> str:
    """The first screenshot and every step's text: two copies of one episode share it."""
    first = hashlib.sha1(plan[0].screenshot.tobytes()).hexdigest()
    texts = "\x00".join(step_reply(p) for p in plan)
    return hashlib.sha1(f"{first}\x00{texts}".encode()).hexdigest()
