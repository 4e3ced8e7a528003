"""`gui_agent` with `cua.planner.mode` online or recorded: the policy writes CODA's plan, the frozen executor (an
endpoint outside verl's pools) turns it into the action, and only the planner's tokens are trained.

One training row per step, as CODA rebuilds the planner's context each step (the text history and two screenshots):
the row's prompt is that context, its response the planner's tokens (mask 1); the executor's action reaches the
next step's prompt only, so no executor token is ever trained.
* online: an episode on `cua.env`, scored by the env, every step row sharing the episode's reward;
* recorded: one recorded state (`extra_info.coda_state`, from `python -m verl_cua.sft.recorded_states`) and its
  labelled action; the executor's action is scored against it (`actions.planner.reward`), no desktop is touched.

An executor that is down, slow or overloaded is infra (the row leaves the batch, counted); one that rejects the
request the planner's text made is the planner's invalid action, so no planner output can mask its own row.
"""

from __future__ import annotations

import threading
from typing import Any

from PIL import Image
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from verl_cua.actions import parse_action
from verl_cua.actions.planner import Plan, PlanStep, executor_messages, get_planner_spec, planner_messages, split_plan
from verl_cua.actions.planner.reward import MAX_REWARD, action_match
from verl_cua.actions.types import GUIAction, ParsedAction
from verl_cua.envs.observation import Element
from verl_cua.eval.executor import ExecutorSettings, ExecutorUnavailable, make_executor
from verl_cua.eval.planner import ExecutorView, action_line, answer_action
from verl_cua.integrations.verl.planner.counts import PlannerCounts

_EXECUTORS: dict[ExecutorSettings, Any] = {}  # one executor per worker process and setting: its stats add up
_LOCK = threading.Lock()


def shared_executor(settings: ExecutorSettings) -> Any:
    """The worker process's executor for `settings` (made once; its connections and stats are shared)."""
    key = repr(settings)  # extra_body is a dict: the settings are not hashable
    with _LOCK:
        if key not in _EXECUTORS:
            _EXECUTORS[key] = make_executor(settings)
        return _EXECUTORS[key]


class PlannerTurns:
    """The planner-executor loop, mixed into `GUIAgentLoop` (which gives `_open`, `_generate`, `_act`, `_score`)."""

    def _planner_init(self, cua) -> None:
        self.planner_mode = cua.planner.mode
        self.planner_spec = None if cua.planner.mode == "none" else get_planner_spec(cua.planner.spec)
        self.executor_settings = ExecutorSettings.from_mapping(dict(cua.executor))

    @property
    def executor(self):
        """This process's executor (made on first use, so a loop that never plans needs no endpoint)."""
        return shared_executor(self.executor_settings)

    # -- one step ------------------------------------------------------------------------------------------------
    async def _plan(self, ep, steps: list[PlanStep], shot: Image.Image, sampling_params, read: str | None = None):
        """One planner turn: (its prompt ids, the generated output, the images shown), or None when aborted;
        `read`: the screen's element table or marks, when the observation type has one."""
        messages = planner_messages(self.planner_spec, ep.instruction, steps, shot, read)
        images = _images(messages)
        prompt_ids = await self.ct_build_initial_tokens(messages, images=images)
        out = await self._generate(ep, prompt_ids, images, sampling_params, self.response_length)
        return None if out is None else (prompt_ids, out, images)

    async def _decide(self, ep, counts: PlannerCounts, plan: Plan, steps, shot, observation, screen, image_size):
        """The step's action and its history text: the planner's `ANS` answer (no executor call) or the executor's
        action; None when the executor failed (infra, set on `ep`)."""
        if plan.answer is not None:
            counts.answers += 1
            return answer_action(plan.thought, plan.answer), f"{self.planner_spec.answer_token} {plan.answer}"
        messages = executor_messages(self.planner_spec, ep.instruction, steps, shot, plan.thought)
        counts.calls += 1
        try:
            reply = await self.executor.act_async(messages, observation)
        except ExecutorUnavailable as exc:
            if exc.kind == "fatal":  # a bad URL, model or key: every row would be infra; stop the run in one line
                raise RuntimeError(f"cua.executor: {exc}; check cua.executor.base_url, model and api_key_env") from None
            if exc.kind == "rejected":  # it refused the request the planner's text made: the planner's failure
                counts.rejected += 1
                cause = self._clean(exc.cause)
                error = f"the executor rejected the plan: {cause}"
                rejected = ParsedAction(valid=False, error=error, format="planner")
                rejected.thought = plan.thought
                return rejected, f"(rejected: {cause})"
            counts.failures += 1
            ep.infra_failure, ep.infra_error = True, f"executor: {exc}"
            return None
        except Exception as exc:  # the executor's own bug (a stand-in's, a client's): ours, never the planner's
            counts.failures += 1
            ep.infra_failure, ep.infra_error = True, f"executor: {type(exc).__name__}: {exc}"
            return None
        counts.seconds += reply.seconds
        parsed = parse_action(reply.text, format=self.executor_settings.format, screen=screen, image=image_size)
        parsed.thought = plan.thought
        return parsed, self._clean(action_line(reply.text))  # its text enters later prompts: special tokens out

    # -- the two modes -------------------------------------------------------------------------------------------
    async def _run_planner(self, ep, lease, service, sampling_params) -> list[AgentLoopOutput]:
        """An online episode: per step plan, then execute (or answer) and step the env; one row per planner turn."""
        obs, opened = await self._open(ep, lease, service)
        if opened is None:
            return [self._infra_output(ep, lease, obs)]
        screen, image_size, _spec = opened
        shot = as_model_sees(obs.screenshot, image_size)
        steps: list[PlanStep] = []
        rows, counts = [], PlannerCounts()
        for _step in range(self.env_cfg.max_steps):
            ep.anchors.append(self._anchor(obs, shot))
            turn = await self._plan(ep, steps, shot, sampling_params, obs.extra.get("elements_text"))
            if turn is None:
                break
            rows.append(turn)
            plan = split_plan(self._reply_text(turn[1].token_ids), self.planner_spec)
            view = ExecutorView(screen, image_size, {"elements": obs.extra.get("elements") or []})
            acted = await self._decide(ep, counts, plan, steps, shot, view, screen, image_size)
            if acted is None:
                break
            parsed, executed = acted
            text = f"{plan.thought}\nAction: {executed}"
            result, parsed = await self._act(ep, service, lease, text, screen, image_size, shot, None, obs, parsed)
            steps.append(PlanStep(thought=plan.thought, executed=executed, screenshot=shot))
            obs = result.observation
            shot = as_model_sees(obs.screenshot, image_size)
            ep.final_screenshot = shot
            if result.info.get("infra_failure") or result.done or parsed.terminal:
                break
        if not rows:
            return [self._infra_output(ep, lease, obs)]
        await self._score(ep, service, lease)
        reward = self._finish_trace(ep)
        return [self._planner_row(ep, row, i, len(rows), reward, counts) for i, row in enumerate(rows)]

    async def _run_recorded(self, ep, state: dict[str, Any], target: dict[str, Any], sampling_params):
        """One recorded state: plan, execute, score the action against the labelled one; no desktop."""
        screen = (int(state["screen"][0]), int(state["screen"][1]))
        image_size = self._image_size(screen)
        ep.instruction = state["instruction"]
        previous = _load(state["screenshots"].get("previous"), image_size)
        shot = _load(state["screenshots"]["current"], image_size)
        steps = [PlanStep(thought=t, executed=a, screenshot=None) for t, a in state.get("history") or []]
        if steps and previous is not None:  # the previous screenshot belongs to the last step of the history
            steps[-1] = PlanStep(thought=steps[-1].thought, executed=steps[-1].executed, screenshot=previous)
        counts = PlannerCounts()
        turn = await self._plan(ep, steps, shot, sampling_params, state.get("elements_text"))
        if turn is None:
            return self._infra_output(ep, _NoLease(), None)
        plan = split_plan(self._reply_text(turn[1].token_ids), self.planner_spec)
        elements = [_element(row) for row in state.get("elements") or []]
        observation = ExecutorView(screen, image_size, {"elements": elements})
        acted = await self._decide(ep, counts, plan, steps, shot, observation, screen, image_size)
        parsed = None if acted is None else acted[0]
        ep.actions.append(plan.thought if acted is None else f"{plan.thought}\nAction: {acted[1]}")
        ep.errors.append(None if parsed is None or parsed.valid else parsed.error)
        ep.invalid += 0 if parsed is None or parsed.valid else 1
        ep.final_screenshot = shot
        reward = 0.0
        if parsed is not None and parsed.valid:
            box = state.get("target_box")
            match = action_match(parsed, GUIAction.from_dict(target), screen, target_box=tuple(box) if box else None)
            reward, ep.score = match.total, match.total / MAX_REWARD
            ep.success = match.total >= MAX_REWARD  # the labelled action hit exactly (inside its box, when given)
        return self._planner_row(ep, turn, 0, 1, reward, counts)

    def _planner_row(self, ep, row, index: int, rows: int, reward: float, counts: PlannerCounts) -> AgentLoopOutput:
        """Step row `index`: the planner's context as prompt, its generated tokens as the response (all mask 1)."""
        prompt_ids, out, images = row
        n = min(len(out.token_ids), self.response_length)
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids),
            response_ids=list(out.token_ids)[:n],
            response_mask=[1] * n,
            response_logprobs=list(out.log_probs)[:n] if out.log_probs else None,
            multi_modal_data={"images": list(images)} if images else {},
            reward_score=0.0 if ep.infra_failure else reward,
            num_turns=2,
            metrics={"generate_sequences": ep.generate_seconds, "tool_calls": ep.env_seconds + counts.seconds},
            extra_fields={**self._extra_fields(ep, rows=rows), **counts.fields(), "step_index": index},
        )


class _NoLease:
    """No env is leased for a recorded state."""

    error = None
    infra_failure = False


def _element(row: dict[str, Any]) -> Element:
    return Element(**{**row, "box": tuple(row["box"])})


def _images(messages: list[dict[str, Any]]) -> list:
    """The image parts of `messages`, in order (what the prompt's image placeholders stand for)."""
    return [
        part["image"]
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image"
    ]


def as_model_sees(image: Image.Image, image_size: tuple[int, int]) -> Image.Image:
    """A screenshot as the model sees it (RGB, resized to the image size): both of gui_agent's modes use it."""
    return image.convert("RGB").resize(image_size)


def _load(path: str | None, image_size: tuple[int, int]) -> Image.Image | None:
    if not path:
        return None
    with Image.open(path) as image:
        return as_model_sees(image, image_size)
