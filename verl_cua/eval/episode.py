"""One evaluation episode: reset, ask the model, parse, step, until done; evaluate; record every step on disk."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from verl_cua.actions import parse_action
from verl_cua.actions.prompts import build_prompt, observation_text, turn_context
from verl_cua.envs.observation import observation_type
from verl_cua.envs.pool import EnvLease
from verl_cua.envs.task_sets import TaskRef
from verl_cua.envs.trajectory import EpisodeWriter, prompt_record, step_record
from verl_cua.eval.apis import Turn, png_bytes
from verl_cua.eval.endpoint import ChatClient, EndpointError
from verl_cua.eval.images import for_model, model_image_size


@dataclass(frozen=True)
class EpisodeSettings:
    """What an episode needs besides the env and the model."""

    format: str
    max_steps: int = 15
    history_images: int = 3
    max_pixels: int | None = None
    success_threshold: float = 1.0
    planner: Any = None  # a `PlannerRun` (`verl-cua eval --planner`): a planner-executor episode; None: the model acts


class RunAborted(RuntimeError):
    """The endpoint refused us for good (bad key, URL or model): no later episode can succeed either."""


def run_episode(
    lease: EnvLease, ref: TaskRef, client: ChatClient, settings: EpisodeSettings, writer: EpisodeWriter
) -> dict[str, Any]:
    """Play `ref` on the leased env and return its `result.json` dict (status success/failure/infra_failure)."""
    start = time.perf_counter()
    totals = new_totals()
    result = new_result(ref, client.model)

    def finish(status: str, end_reason: str, error: str | None = None) -> dict[str, Any]:
        return finish_result(result, totals, start, status, end_reason, error)

    t = time.perf_counter()
    obs = lease.reset(ref.task)
    totals["env_seconds"] += time.perf_counter() - t
    if lease.infra_failure:
        return finish("infra_failure", "infra", lease.error)
    result["instruction"] = obs.instruction
    screen = obs.screen
    image = model_image_size(settings.format, screen, settings.max_pixels)
    spec = build_prompt(settings.format, screen=screen, image=image, observation=observation_type(obs.extra))
    first_text = spec.user_text(obs.instruction, turn_context(settings.format, obs.extra))
    shot, turn = _screen(writer, 0, obs.screenshot, image, first_text, spec.screenshot)
    result["final_screenshot"] = shot
    turns = [turn]
    end_reason = "max_steps"
    for step in range(1, settings.max_steps + 1):
        try:
            reply = client.complete(spec, turns, settings.history_images)
        except EndpointError as exc:  # not the model's doing: retried (or stopping the run), never scored
            if exc.kind == "fatal":
                raise RunAborted(str(exc)) from None
            return finish("infra_failure", "endpoint" if exc.kind == "retryable" else "endpoint_rejected", str(exc))
        turns[-1].reply = reply
        marks = obs.extra.get("marks")  # the set-of-marks centres of the screen the reply acted on (som)
        parsed = parse_action(reply.text, format=settings.format, screen=screen, image=image, marks=marks)
        t = time.perf_counter()
        stepped = lease.step(parsed)
        env_s = time.perf_counter() - t
        totals["model_seconds"] += reply.seconds
        totals["env_seconds"] += env_s
        for key in ("prompt_tokens", "completion_tokens"):
            totals[key] += (reply.usage or {}).get(key, 0)
        result["steps"] = step
        refused = parsed.valid and not stepped.info.get("action_valid", True)  # parsed, but this env cannot do it
        result["invalid_actions"] += 0 if parsed.valid and not refused else 1
        infra = bool(stepped.info.get("infra_failure"))
        shown = [{"type": "image", "image": shot}] if spec.screenshot else []  # a11y_tree: the table alone
        shown.append({"type": "text", "text": turns[-1].text})
        asked = [{"role": "system", "content": spec.system}] if step == 1 else []  # then the turn after each reply
        asked.append({"role": "user", "content": shown})
        writer.step(
            step_record(
                step=step,
                screenshot=shot,
                screen=screen,
                model_text=reply.text,
                action=parsed.to_dict(),
                valid=parsed.valid,
                error=parsed.error,
                env_error=stepped.info.get("error") if parsed.valid else None,  # else it repeats the parse error
                infra_failure=infra,
                reward=stepped.reward,
                timing={"model_s": reply.seconds, "env_s": env_s},
                usage=reply.usage,
                response=reply.response,
                prompt=prompt_record(asked, str, layout="episode", history_images=settings.history_images),
                api_result=stepped.info.get("api_result"),
                focused_app=obs.extra.get("focused_app"),
                elements_text=obs.extra.get("elements_text"),
            )
        )
        if infra:
            return finish("infra_failure", "infra", stepped.info.get("error"))
        error = parsed.error if not parsed.valid else stepped.info.get("error") if refused else None
        context = turn_context(settings.format, stepped.observation.extra)
        if stepped.observation is not obs:  # an invalid action leaves the screen as it was: no new file
            obs = stepped.observation
            shot, turn = _screen(writer, step, obs.screenshot, image, observation_text(step, error, context),
                                 spec.screenshot)  # fmt: skip
        else:
            text = observation_text(step, error, context)
            turn = Turn(image=turns[-1].image, text=text, image_png=turns[-1].image_png)
        turn.error = error
        result["final_screenshot"] = shot
        if parsed.terminal or stepped.done:
            end_reason = parsed.terminal or ("desktop_broken" if stepped.info.get("desktop_broken") else "env_done")
            break
        turns.append(turn)
    return score_episode(lease, result, totals, start, settings.success_threshold, end_reason)


def new_totals() -> dict[str, float]:
    """An episode's running totals: model and env seconds, prompt and completion tokens."""
    return {"model_seconds": 0.0, "env_seconds": 0.0, "prompt_tokens": 0, "completion_tokens": 0}


def new_result(ref: TaskRef, model: str) -> dict[str, Any]:
    """The `result.json` dict of an episode not yet played."""
    return {
        "task": ref.key,
        "env": ref.env,
        "domain": ref.domain,
        "task_id": ref.task_id,
        "instruction": "",
        "model": model,
        "steps": 0,
        "invalid_actions": 0,
        "score": None,
        "error": None,
        "final_screenshot": None,
    }


def finish_result(result: dict[str, Any], totals: dict[str, float], start: float, status: str, end_reason: str,
                  error: str | None = None) -> dict[str, Any]:  # fmt: skip
    """`result` with its status, end reason, error, usage and seconds (since `start`, a `perf_counter` time)."""
    usage = {"prompt_tokens": totals["prompt_tokens"], "completion_tokens": totals["completion_tokens"]}
    result.update(status=status, end_reason=end_reason, error=error or result["error"], usage=usage)
    result.update(model_seconds=totals["model_seconds"], env_seconds=totals["env_seconds"])
    result["seconds"] = time.perf_counter() - start
    return result


def score_episode(lease: EnvLease, result: dict[str, Any], totals: dict[str, float], start: float, threshold: float,
                  end_reason: str) -> dict[str, Any]:  # fmt: skip
    """Evaluate the played episode and finish `result`: success at `threshold`, an infra failure if scoring broke."""
    t = time.perf_counter()
    score = lease.evaluate()
    totals["env_seconds"] += time.perf_counter() - t
    if lease.infra_failure:
        return finish_result(result, totals, start, "infra_failure", "infra", lease.error)
    if lease.desktop_broken:  # the agent broke its desktop: its failure, scored 0
        end_reason = "desktop_broken"
    result["score"] = float(score)
    return finish_result(result, totals, start, "success" if score >= threshold else "failure", end_reason)


def _screen(writer: EpisodeWriter, index: int, screenshot, size: tuple[int, int], text: str, show: bool = True,
            ) -> tuple[str, Turn]:  # fmt: skip
    """Save a screenshot and make the turn that shows it (`show` False: a text-only observation, the turn has no
    image); one PNG encoding serves both when the model gets the screenshot as it is (1080p PNG encoding is the
    largest cost of a step here)."""
    png = png_bytes(screenshot)
    name = writer.screenshot(index, png)
    if not show:
        return name, Turn(image=None, text=text)
    image = for_model(screenshot, size)
    return name, Turn(image=image, text=text, image_png=png if image is screenshot else None)
