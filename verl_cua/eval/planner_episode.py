"""One planner-mode eval episode (`verl-cua eval --planner`): each step the planner endpoint gets CODA's context (its
prompt, the text history, two screenshots), its thought goes to the executor (or its `ANS` answer ends the episode),
the env steps; every step is recorded with the planner's reply and the executor's (`executor` in the step line)."""

from __future__ import annotations

import time
from typing import Any

from verl_cua.actions.planner import PlanStep, planner_messages, split_plan
from verl_cua.actions.types import ParsedAction
from verl_cua.envs.pool import EnvLease
from verl_cua.envs.task_sets import TaskRef
from verl_cua.envs.trajectory import EpisodeWriter, prompt_record, step_record
from verl_cua.eval.apis import png_bytes
from verl_cua.eval.endpoint import ChatClient, EndpointError
from verl_cua.eval.episode import EpisodeSettings, RunAborted, finish_result, new_result, new_totals, score_episode
from verl_cua.eval.executor import openai_message
from verl_cua.eval.images import for_model, model_image_size
from verl_cua.eval.planner import COUNT_KEYS, ExecutorDown, ExecutorView, PlannerRun

OUTCOME_COUNTS = {"action": "executor_calls", "rejected": "executor_calls", "unavailable": "executor_calls",
                  "answer": "planner_answers"}  # fmt: skip


def run_planner_episode(
    lease: EnvLease, ref: TaskRef, client: ChatClient, settings: EpisodeSettings, writer: EpisodeWriter
) -> dict[str, Any]:
    """Play `ref` as CODA's planner (the endpoint behind `client`) and executor (`settings.planner`); the
    `result.json` dict, with the executor's counts."""
    planner: PlannerRun = settings.planner
    spec = planner.spec
    start, totals = time.perf_counter(), new_totals()
    result = {**new_result(ref, client.model), "planner": spec.name, **dict.fromkeys(COUNT_KEYS, 0)}
    result["executor_seconds"] = 0.0

    def finish(status: str, end_reason: str, error: str | None = None) -> dict[str, Any]:
        return finish_result(result, totals, start, status, end_reason, error)

    t = time.perf_counter()
    obs = lease.reset(ref.task)
    totals["env_seconds"] += time.perf_counter() - t
    if lease.infra_failure:
        return finish("infra_failure", "infra", lease.error)
    instruction = result["instruction"] = obs.instruction
    screen = obs.screen
    image = model_image_size(settings.format, screen, settings.max_pixels)
    names: dict[int, str] = {}  # id of a screen's model image -> its screenshot file (prompt records name files)
    shot = _screen(writer, 0, obs.screenshot, image, names)
    result["final_screenshot"] = names[id(shot)]
    steps: list[PlanStep] = []
    end_reason = "max_steps"
    for step in range(1, settings.max_steps + 1):
        read = obs.extra.get("elements_text")  # the element table or marks of the observation type, if any
        messages = planner_messages(spec, instruction, steps, shot, read)
        try:
            reply = client.complete_messages([openai_message(m) for m in messages])
        except EndpointError as exc:  # not the planner's doing: retried (or stopping the run), never scored
            if exc.kind == "fatal":
                raise RunAborted(str(exc)) from None
            return finish("infra_failure", "endpoint" if exc.kind == "retryable" else "endpoint_rejected", str(exc))
        totals["model_seconds"] += reply.seconds
        for key in ("prompt_tokens", "completion_tokens"):
            totals[key] += (reply.usage or {}).get(key, 0)
        plan = split_plan(reply.text, spec)
        view = ExecutorView(screen, image, {"elements": obs.extra.get("elements") or []})
        try:
            decision = planner.decide(plan, instruction, steps, shot, view)
        except ExecutorDown as exc:
            raise RunAborted(str(exc)) from None
        outcome = decision.record["outcome"]
        result[OUTCOME_COUNTS[outcome]] += 1
        result["executor_failures"] += outcome == "unavailable"
        result["executor_rejected"] += outcome == "rejected"
        result["executor_seconds"] += decision.seconds
        if decision.messages is not None:
            decision.record["prompt"] = prompt_record(decision.messages, lambda i: names.get(id(i)), layout="step")
        result["steps"] = step
        common = {
            "step": step,
            "screenshot": names[id(shot)],
            "screen": screen,
            "model_text": reply.text,  # the planner's reply; the executor's is in `executor`
            "usage": reply.usage,
            "response": reply.response,
            "prompt": prompt_record(messages, lambda i: names.get(id(i)), layout="step"),
            "focused_app": obs.extra.get("focused_app"),
            "elements_text": read,
            "executor": decision.record,
        }
        parsed = decision.parsed
        if parsed is None:  # the executor failed: infra, the step is recorded for the record, the episode retried
            error = decision.record["error"]
            failed = ParsedAction(valid=False, error=error, thought=plan.thought, format="planner")
            writer.step(step_record(**common, action=failed.to_dict(), valid=False, error=error, infra_failure=True,
                                    timing={"model_s": reply.seconds, "executor_s": decision.seconds}))  # fmt: skip
            return finish("infra_failure", "executor", error)
        t = time.perf_counter()
        stepped = lease.step(parsed)
        env_s = time.perf_counter() - t
        totals["env_seconds"] += env_s
        refused = parsed.valid and not stepped.info.get("action_valid", True)  # parsed, but this env cannot do it
        result["invalid_actions"] += 0 if parsed.valid and not refused else 1
        infra = bool(stepped.info.get("infra_failure"))
        writer.step(
            step_record(
                **common,
                action=parsed.to_dict(),
                valid=parsed.valid,
                error=parsed.error,
                env_error=stepped.info.get("error") if parsed.valid else None,
                infra_failure=infra,
                reward=stepped.reward,
                timing={"model_s": reply.seconds, "executor_s": decision.seconds, "env_s": env_s},
                api_result=stepped.info.get("api_result"),
            )
        )
        if infra:
            return finish("infra_failure", "infra", stepped.info.get("error"))
        steps.append(PlanStep(thought=plan.thought, executed=decision.executed, screenshot=shot))
        if stepped.observation is not obs:  # an invalid action leaves the screen as it was: no new file
            obs = stepped.observation
            shot = _screen(writer, step, obs.screenshot, image, names)
        result["final_screenshot"] = names[id(shot)]
        if parsed.terminal or stepped.done:
            end_reason = parsed.terminal or ("desktop_broken" if stepped.info.get("desktop_broken") else "env_done")
            break
    return score_episode(lease, result, totals, start, settings.success_threshold, end_reason)


def _screen(writer: EpisodeWriter, index: int, screenshot, size: tuple[int, int], names: dict[int, str]) -> bytes:
    """Save a screenshot; the PNG of the image both models see (one encoding when that is the screenshot itself),
    named in `names` by its id."""
    png = png_bytes(screenshot)
    image = for_model(screenshot, size)
    shown = png if image is screenshot else png_bytes(image)
    names[id(shown)] = writer.screenshot(index, png)
    return shown
