"""`gui_agent`: verl's agent loop for screenshot agents. Each episode leases an env from the worker's pool,
shows the model screenshots, parses its output with `verl_cua.actions`, steps the env and scores the episode."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple
from uuid import uuid4

from omegaconf import OmegaConf
from PIL import Image
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from verl_cua.actions import parse_action
from verl_cua.actions.conversation import first_turn, image_grid_factor, observation_turn, step_prompt
from verl_cua.actions.geometry import smart_resize_size
from verl_cua.actions.prompts import build_prompt, turn_context
from verl_cua.algos.gigpo import SCREEN_GRID, screen_anchor, screenshot_anchor, text_anchor
from verl_cua.algos.success_buffer import task_instance
from verl_cua.envs.base import Observation
from verl_cua.envs.observation import observation_type, tree_feedback
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.env_service import env_service
from verl_cua.integrations.verl.estimator_plan import plan_for
from verl_cua.integrations.verl.hooks import TurnContext, TurnHook
from verl_cua.integrations.verl.planner.counts import NO_PLANNER
from verl_cua.integrations.verl.planner.loop import PlannerTurns, as_model_sees
from verl_cua.integrations.verl.reply_text import plain_reply, special_strings
from verl_cua.integrations.verl.screenshots.compact import png_bytes as compact_png_bytes
from verl_cua.integrations.verl.screenshots.grid_prompts import use_grid_prompts
from verl_cua.integrations.verl.trace.episodes import EpisodeTrace, open_trace, trace_prompt

logger = logging.getLogger(__name__)

NO_EXTRA = object()
# TEST-ONLY: "1" reports infra failures as agent failures (kept in their groups, scored 0), the negative control of
# tests/integrations/verl/test_chaos_on_cpu.py; never set it in a real run
INFRA_AS_AGENT_FAILURE = "VERL_CUA_TEST_INFRA_AS_AGENT_FAILURE"
ABORT_RETRIES = 3  # a request the server aborted (a weight sync, a pause) is sent again this many times


def infra_as_agent_failure() -> bool:
    """Test-only: whether `VERL_CUA_TEST_INFRA_AS_AGENT_FAILURE=1` asks to count infra failures as agent failures."""
    return os.environ.get(INFRA_AS_AGENT_FAILURE) == "1"


@dataclass
class Episode:
    """What one episode did, for the reward, the metrics and the teacher pass."""

    task: Any
    instruction: str = ""
    actions: list[str] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    invalid: int = 0
    score: float = 0.0
    success: bool = False
    infra_failure: bool = False
    infra_error: str | None = None
    desktop_broken: bool = False  # the agent broke its desktop after acting: a failure scored 0, never masked
    truncated: bool = False
    final_screenshot: Image.Image | None = None
    screenshot: bool = True  # the model was shown screenshots (not a text-only observation): the teacher's may be
    env_seconds: float = 0.0
    generate_seconds: float = 0.0
    weight_versions: list[int] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)
    trace: EpisodeTrace | None = None
    terminal: str | None = None  # "done" / "fail" when the model ended the episode
    last_generate_seconds: float = 0.0
    aborted_requests: int = 0
    turn_hooks: list[TurnHook] = field(default_factory=list)  # the run's per-token signals (CoSo's weights)
    reads: list[str | None] = field(default_factory=list)  # each observation's element table (None: screenshot only)
    tree_feedback: bool = False  # feedback adds the table's last change (`cua.sdpo.tree_feedback`)

    @property
    def steps(self) -> int:
        """Model turns taken."""
        return len(self.actions)

    def feedback(self) -> str:
        """What the evaluator can say beyond the score (SDPO's teacher reads it); "" when there is nothing more."""
        if self.infra_failure:
            return f"The environment failed: {self.infra_error}"
        parts = []
        bad = [e for e in self.errors if e]
        if self.invalid:
            last = bad[-1] if bad else "unknown"
            parts.append(f"{self.invalid} outputs were not valid actions; the last error: {last}.")
        if self.truncated:
            parts.append("The episode ran out of its token budget.")
        tree = tree_feedback(self.reads) if self.tree_feedback and not self.success else ""
        return "\n".join(p for p in (" ".join(parts), tree) if p)


def png_bytes(image: Image.Image | None) -> bytes | None:
    """A screenshot as PNG bytes (what crosses Ray and TransferQueue)."""
    return None if image is None else compact_png_bytes(image)


@register("gui_agent")
class GUIAgentLoop(PlannerTurns, AgentLoopBase):
    """Screenshots in, actions out: one env episode per sample, in `cua.env.rows` layout (episode or step); with
    `cua.planner.mode` a planner's turns instead (`planner.loop`: online episodes or recorded states)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cua = CuaConfig.from_mapping(OmegaConf.to_container(self.config.cua, resolve=True))
        self.env_cfg, self.action_cfg, self.trace_cfg = cua.env, cua.action, cua.trace
        self._planner_init(cua)
        self.anchor = cua.gigpo.anchor
        self.tree_feedback = cua.sdpo.tree_feedback and cua.env.observation != "screenshot"
        self.format = self.action_cfg.format
        self.response_length = self.rollout_config.response_length
        plan = plan_for(OmegaConf.select(self.config, "algorithm.adv_estimator"), cua)
        self._turn_hooks = [(hook, hook.settings(cua)) for hook in plan.hooks if hook.turns]  # decided once
        self._batch_step = None
        self._factor, self._max_pixels = _image_grid(self.processor, self.env_cfg.max_pixels)
        use_grid_prompts(self.continuous_token_builder)  # prompt tokens from grids: no patches made and dropped

    # -- the loop ------------------------------------------------------------------------------------------------
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput | list[AgentLoopOutput]:
        """Run one episode of the row's task and return it as training rows."""
        task = _row_task(kwargs)
        self._batch_step = kwargs.get("global_steps")
        service = env_service(self.env_cfg)
        ep = Episode(task=task, trace=open_trace(self.trace_cfg, kwargs, task), turn_hooks=self._episode_hooks(),
                     tree_feedback=self.tree_feedback)  # fmt: skip
        if self.planner_mode == "recorded":  # a recorded state and its label: no desktop
            state, target = recorded_state(kwargs)
            return await self._run_recorded(ep, state, target, sampling_params)
        async with service.slot():
            lease = await service.call(service.pool.acquire, task=task)
            try:
                if self.planner_mode == "online":
                    return await self._run_planner(ep, lease, service, sampling_params)
                if self.env_cfg.rows == "step":
                    return await self._run_steps(ep, lease, service, sampling_params)
                return await self._run_episode(ep, lease, service, sampling_params)
            finally:
                await service.call(lease.release)

    async def _open(self, ep: Episode, lease, service) -> tuple[Any, _Screen | None]:
        """Reset the leased env to the episode's task: its first observation and the screen's sizes and prompt
        (None when the reset was an infra failure)."""
        obs = await self._env(ep, service, lease.reset, ep.task)
        if lease.infra_failure:
            return obs, None
        ep.instruction = obs.instruction
        image_size = self._image_size(obs.screen)
        spec = build_prompt(self.format, screen=obs.screen, image=image_size, observation=observation_type(obs.extra))
        ep.screenshot = spec.screenshot
        return obs, _Screen(obs.screen, image_size, spec)

    async def _run_episode(self, ep: Episode, lease, service, sampling_params) -> AgentLoopOutput:
        obs, opened = await self._open(ep, lease, service)
        if opened is None:
            return self._infra_output(ep, lease, obs)
        screen, image_size, spec = opened
        shot = _shot(obs, image_size)
        messages = first_turn(spec, ep.instruction, shot, turn_context(self.format, obs.extra))
        images = [shot]  # every screenshot (traces, anchors); the model is shown spec.shown(images)
        prompt_ids = await self.ct_build_initial_tokens(messages, images=spec.shown(images))
        runtime, mask, logprobs = list(prompt_ids), [], None
        for step in range(self.env_cfg.max_steps):
            budget = self.response_length - len(mask)
            if budget <= 0:
                ep.truncated = True
                break
            ep.anchors.append(self._anchor(obs, images[-1]))
            out = await self._generate(ep, runtime, spec.shown(images), sampling_params, budget)
            if out is None:
                break
            if logprobs is None and out.log_probs:
                logprobs = [0.0] * len(mask)
            before = mask
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                runtime, out.token_ids, mask, logprobs, assistant_logprobs=out.log_probs or None
            )
            for hook in ep.turn_hooks:  # each per-token signal, aligned with the mask as it grows
                hook.on_turn(out.token_ids, screen, image_size, obs.extra.get("marks"))
                hook.on_merge(merged, before)
            runtime = merged.token_ids
            text = self._reply_text(out.token_ids)
            prompt = None
            if ep.trace is not None:  # the first prompt whole, then each turn added after a reply
                prompt = partial(trace_prompt, messages if step == 0 else messages[-1:], images, 0, "episode")
            result, parsed = await self._act(ep, service, lease, text, screen, image_size, images[-1], prompt, obs)
            obs = result.observation
            shot = _shot(obs, image_size)
            ep.final_screenshot = shot
            if result.info.get("infra_failure") or result.done or parsed.terminal or step + 1 >= self.env_cfg.max_steps:
                break
            previous = [*messages, {"role": "assistant", "content": text}]
            shown = shot if spec.screenshot else None  # a text-only observation: the table alone
            turn = observation_turn(step + 1, ep.errors[-1], shown, turn_context(self.format, obs.extra))
            merged2, mask2, logprobs2 = await self.ct_merge_context_msg(
                previous, [*previous, turn], runtime, mask, logprobs
            )
            if len(mask2) >= self.response_length:  # no room for the next screenshot and an answer: stop here
                ep.truncated = True
                break
            for hook in ep.turn_hooks:
                hook.on_merge(merged2, mask)
            messages, runtime, mask, logprobs = [*previous, turn], merged2.token_ids, mask2, logprobs2
            images.append(shot)
        if ep.infra_failure and not ep.steps:  # the first request was aborted: nothing generated to train on
            return self._infra_output(ep, lease, obs)
        await self._score(ep, service, lease)
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids),
            response_ids=runtime[len(prompt_ids) :],
            response_mask=mask,
            response_logprobs=logprobs,
            multi_modal_data=_media(spec.shown(images)),
            reward_score=self._finish_trace(ep),
            num_turns=2 * ep.steps + 1,
            metrics={"generate_sequences": ep.generate_seconds, "tool_calls": ep.env_seconds},
            extra_fields={**self._extra_fields(ep, rows=1), **self._turn_fields(ep, None)},
        )

    async def _run_steps(self, ep: Episode, lease, service, sampling_params) -> list[AgentLoopOutput]:
        obs, opened = await self._open(ep, lease, service)
        if opened is None:
            return [self._infra_output(ep, lease, obs)]
        screen, image_size, spec = opened
        shots = [_shot(obs, image_size)]
        rows: list[tuple[list[int], Any, list[Image.Image]]] = []
        for _step in range(self.env_cfg.max_steps):
            recent = shots[-self.env_cfg.history_images :]
            invalid = [e is not None for e in ep.errors]
            context = turn_context(self.format, obs.extra)
            earlier = ep.reads[-len(recent) : -1] if len(recent) > 1 and ep.reads else []  # the window's older tables
            messages = step_prompt(spec, ep.instruction, ep.actions, invalid, recent, context, earlier)
            prompt_ids = await self.ct_build_initial_tokens(messages, images=spec.shown(recent))
            ep.anchors.append(self._anchor(obs, shots[-1]))
            out = await self._generate(ep, prompt_ids, spec.shown(recent), sampling_params, self.response_length)
            if out is None:
                break
            rows.append((prompt_ids, out, spec.shown(recent)))
            for hook in ep.turn_hooks:
                hook.on_turn(out.token_ids, screen, image_size, obs.extra.get("marks"))
            text = self._reply_text(out.token_ids)
            first = len(shots) - len(recent)  # the episode's number of the first screenshot this prompt holds
            prompt = None if ep.trace is None else partial(trace_prompt, messages, recent, first, "step")
            result, parsed = await self._act(ep, service, lease, text, screen, image_size, recent[-1], prompt, obs)
            obs = result.observation
            shots.append(_shot(obs, image_size))
            ep.final_screenshot = shots[-1]
            if result.info.get("infra_failure") or result.done or parsed.terminal:
                break
        if not rows:  # the first request was aborted: nothing generated to train on
            return [self._infra_output(ep, lease, obs)]
        await self._score(ep, service, lease)
        reward = self._finish_trace(ep)
        outputs = []
        for i, (prompt_ids, out, recent) in enumerate(rows):
            outputs.append(
                AgentLoopOutput(
                    prompt_ids=list(prompt_ids),
                    response_ids=list(out.token_ids)[: self.response_length],
                    response_mask=[1] * min(len(out.token_ids), self.response_length),
                    response_logprobs=list(out.log_probs)[: self.response_length] if out.log_probs else None,
                    multi_modal_data=_media(recent),
                    reward_score=reward,
                    num_turns=2,
                    metrics={"generate_sequences": ep.generate_seconds, "tool_calls": ep.env_seconds},
                    extra_fields={
                        **self._extra_fields(ep, rows=len(rows)),
                        "step_index": i,
                        **self._turn_fields(ep, i),
                    },
                )
            )
        return outputs

    # -- pieces --------------------------------------------------------------------------------------------------
    def _reply_text(self, token_ids) -> str:
        """The reply as text for the env and later prompts, special-token strings taken out (`reply_text`)."""
        return self._clean(self.tokenizer.decode(token_ids, skip_special_tokens=True))

    def _clean(self, text: str) -> str:
        """Decoded text with the tokenizer's special-token strings taken out, as actions are parsed from it."""
        if getattr(self, "_specials", None) is None:
            self._specials = special_strings(self.tokenizer)
        return plain_reply(text, self._specials)

    def _episode_hooks(self) -> list[TurnHook]:
        """A fresh turn hook of each per-token signal the run computes (`StepHook.turns`), for one episode."""
        if not self._turn_hooks:
            return []
        align = self.continuous_token_builder.align_response_metadata
        context = TurnContext(self.tokenizer, self.format, self.response_length, self._clean, align)
        return [hook.turn_hook(section, context) for hook, section in self._turn_hooks]

    def _turn_fields(self, ep: Episode, row: int | None) -> dict[str, Any]:
        """The extra fields the episode's turn hooks give its row (`row=None`) or its `row`-th step row."""
        return {key: value for hook in ep.turn_hooks for key, value in hook.fields(row).items()}

    async def _generate(self, ep: Episode, prompt_ids, images, sampling_params, budget: int):
        """One model turn. A request the server aborted (empty or cut by a weight sync or pause) is sent again from
        the same prompt; after `ABORT_RETRIES` more the episode is an infra failure, never an invalid action."""
        params = dict(sampling_params)
        params["max_tokens"] = max(1, min(self.action_cfg.max_tokens_per_step, budget))
        for _attempt in range(1 + ABORT_RETRIES):
            start = time.perf_counter()
            out = await self.server_manager.generate(
                request_id=uuid4().hex, prompt_ids=list(prompt_ids), sampling_params=params, image_data=list(images)
            )
            ep.last_generate_seconds = time.perf_counter() - start
            ep.generate_seconds += ep.last_generate_seconds
            if getattr(out, "stop_reason", None) != "aborted":
                break
            ep.aborted_requests += 1
            logger.warning("generation aborted by the server (%d so far in this episode); sending it again",
                           ep.aborted_requests)  # fmt: skip
        else:
            ep.infra_failure = True
            ep.infra_error = f"the rollout server aborted the request {1 + ABORT_RETRIES} times"
            return None
        version = (out.extra_fields or {}).get("global_steps")
        if version is not None:
            ep.weight_versions.append(int(version))
        return out

    async def _env(self, ep: Episode, service, fn, *args):
        start = time.perf_counter()
        try:
            return await service.call(fn, *args)
        finally:
            ep.env_seconds += time.perf_counter() - start

    async def _act(self, ep: Episode, service, lease, text: str, screen, image_size, seen: Image.Image, prompt=None,
                   shown: Observation | None = None, parsed=None):  # fmt: skip
        """Parse `text` against the observation `shown` (its set-of-marks centres), step the env, record it;
        `parsed`: the action already parsed (a planner's executor gave it; `text` is then what the trace shows)."""
        extra = shown.extra if shown is not None else {}
        read = extra.get("elements_text")
        if parsed is None:
            parsed = parse_action(text, format=self.format, screen=screen, image=image_size, marks=extra.get("marks"))
        ep.actions.append(text)
        ep.errors.append(None if parsed.valid else parsed.error)
        ep.invalid += 0 if parsed.valid else 1
        ep.terminal = parsed.terminal
        before = ep.env_seconds
        result = await self._env(ep, service, lease.step, parsed)
        if result.info.get("infra_failure"):
            ep.infra_failure, ep.infra_error = True, result.info.get("error")
        elif parsed.valid and not result.info.get("action_valid", True):  # parsed, but this env cannot do it
            ep.errors[-1] = str(result.info.get("error") or "the env refused the action")
            ep.invalid += 1
        ep.desktop_broken = ep.desktop_broken or bool(result.info.get("desktop_broken"))
        ep.reads = [*(ep.reads or [read]), result.observation.extra.get("elements_text")]  # the first, then each after
        if ep.trace is not None:
            ep.trace.step(seen=seen, screen=screen, text=text, parsed=parsed, info=result.info, reward=result.reward,
                          model_s=ep.last_generate_seconds, env_s=ep.env_seconds - before, prompt=prompt,
                          read=read)  # fmt: skip
        return result, parsed

    async def _score(self, ep: Episode, service, lease) -> None:
        if not ep.infra_failure:
            ep.score = float(await self._env(ep, service, lease.evaluate))
        if lease.infra_failure:
            ep.infra_failure, ep.infra_error = True, lease.error
            ep.score = 0.0
        ep.desktop_broken = (ep.desktop_broken or lease.desktop_broken) and not ep.infra_failure
        ep.success = not ep.infra_failure and ep.score >= self.env_cfg.success_threshold

    def _finish_trace(self, ep: Episode) -> float:
        """The episode's reward, after writing its traced result (when it is traced)."""
        reward = self._reward(ep)
        if ep.trace is not None:
            ep.trace.finish(ep, reward, ep.final_screenshot, self._end_reason(ep))
        return reward

    def _end_reason(self, ep: Episode) -> str:
        """Why the episode stopped, in the eval harness's words."""
        if ep.infra_failure:
            return "infra"
        if ep.desktop_broken:
            return "desktop_broken"
        if ep.truncated:
            return "truncated"
        if ep.terminal:
            return ep.terminal
        return "max_steps" if ep.steps >= self.env_cfg.max_steps else "env_done"

    def _reward(self, ep: Episode) -> float:
        """Task success in [0, 1] minus the invalid-action penalty; 0 for infra failures (excluded from training)."""
        if ep.infra_failure:
            return 0.0
        return float(max(0.0, min(1.0, ep.score)) - self.action_cfg.invalid_penalty * ep.invalid)

    def _infra_output(self, ep: Episode, lease, obs) -> AgentLoopOutput:
        ep.infra_failure, ep.infra_error = True, ep.infra_error or lease.error
        self._finish_trace(ep)
        ids = self.tokenizer.encode("infra failure", add_special_tokens=False)[:1] or [0]
        # every row must carry the fields its siblings carry: verl reads rollout_log_probs for the whole batch
        logprobs = [0.0] if getattr(self.rollout_config, "calculate_log_probs", False) else None
        return AgentLoopOutput(
            prompt_ids=ids,
            response_ids=ids,
            response_mask=[0],
            response_logprobs=logprobs,
            reward_score=0.0,
            num_turns=1,
            metrics={},
            extra_fields=self._extra_fields(ep, rows=1),
        )

    def _extra_fields(self, ep: Episode, rows: int) -> dict[str, Any]:
        return {
            **NO_PLANNER,
            "cua_task": str(ep.task if not isinstance(ep.task, dict) else ep.task.get("task", ep.task)),
            "cua_instance": task_instance(ep.task),  # the success buffer's key: the task id with its seed
            "cua_instruction": ep.instruction,
            "cua_success": bool(ep.success),
            "cua_score": float(ep.score),
            "cua_infra_failure": bool(ep.infra_failure) and not infra_as_agent_failure(),
            "cua_infra_error": ep.infra_error or "",
            "cua_desktop_broken": bool(ep.desktop_broken),
            "cua_steps": ep.steps,
            "cua_invalid_actions": ep.invalid,
            "cua_invalid_steps": [e is not None for e in ep.errors],  # GiGPO charges each penalty at its step
            "cua_truncated": bool(ep.truncated),
            "cua_actions": list(ep.actions),
            "cua_feedback": ep.feedback(),
            "cua_final_screenshot": png_bytes(ep.final_screenshot) if ep.screenshot else None,  # a11y_tree: none
            "cua_rows": rows,
            "cua_anchors": list(ep.anchors),
            "cua_env_seconds": ep.env_seconds,
            "cua_trace_dir": str(ep.trace.dir) if ep.trace is not None else "",
            "cua_generate_seconds": ep.generate_seconds,
            "cua_aborted_requests": ep.aborted_requests,
            # verl's validation reports `acc` as its core metric: val-core/<data_source>/acc/mean@N is the success
            # rate (verl counts a row without it as 0, so an infra failure is 0 there, as OSWorld's scripts count it)
            "reward_extra_info": {"acc": float(ep.success)},
            **self._weight_versions(ep),
        }

    def _weight_versions(self, ep: Episode) -> dict[str, int | None]:
        """The policy versions the episode was generated with (verl's off-policy staleness tags)."""
        versions = ep.weight_versions or ([int(self._batch_step)] if self._batch_step is not None else [])
        if not versions:
            return {"global_steps": None, "min_global_steps": None, "max_global_steps": None}
        return {"global_steps": versions[-1], "min_global_steps": min(versions), "max_global_steps": max(versions)}

    def _anchor(self, obs, shot: Image.Image) -> str:
        """GiGPO's state key for the screen the agent acts on: a coarse quantised thumbnail (`screen`), the exact
        pixels (`screenshot`), or the accessibility tree (`a11y`, the thumbnail when the env has none)."""
        tree = obs.extra.get("accessibility_tree") if self.anchor == "a11y" else None
        if tree:
            return text_anchor(str(tree))
        if self.anchor == "screenshot":
            return screenshot_anchor(shot.tobytes() + repr(shot.size).encode())
        return screen_anchor(shot.convert("L").resize(SCREEN_GRID, Image.BOX).tobytes())

    def _image_size(self, screen: tuple[int, int]) -> tuple[int, int]:
        return smart_resize_size(screen, self._factor, self._factor * self._factor, self._max_pixels)


def _image_grid(processor, max_pixels: int) -> tuple[int, int]:
    """The processor's pixel factor (patch x merge) and the pixel cap we resize screenshots to."""
    return image_grid_factor(getattr(processor, "image_processor", None), max_pixels)


def recorded_state(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recorded-state row's state (`extra_info.coda_state`) and labelled action (`reward_model.ground_truth`)."""
    state = (kwargs.get("extra_info") or {}).get("coda_state")
    truth = (kwargs.get("reward_model") or {}).get("ground_truth")
    if not isinstance(state, dict) or truth is None:
        raise ValueError(
            "cua.planner.mode=recorded needs rows of recorded states (extra_info.coda_state and "
            "reward_model.ground_truth): build them with `python -m verl_cua.sft.recorded_states`"
        )
    return state, json.loads(truth) if isinstance(truth, str) else dict(truth)


def _row_task(kwargs: dict[str, Any]) -> Any:
    """The env task of a dataset row (`extra_info.task`, with `extra_info.seed` for seeded envs)."""
    info = kwargs.get("extra_info") or {}
    if "task" not in info:
        raise ValueError(
            "gui_agent rows need extra_info.task; build datasets with `python -m verl_cua.integrations.verl.dataset`"
        )
    task = info["task"]
    seed = info.get("seed")
    if seed is not None and int(seed) >= 0 and isinstance(task, str) and not task.endswith(".json"):
        return {"task": task, "seed": int(seed)}
    return task


class _Screen(NamedTuple):
    """An episode's screen: its size, the size its screenshots are resized to for the model, the format's prompt."""

    screen: tuple[int, int]
    image_size: tuple[int, int]
    spec: Any


def _media(images: list) -> dict[str, list]:
    """verl's `multi_modal_data` for the screenshots a prompt holds: none (a text-only observation) is no entry."""
    return {"images": list(images)} if images else {}


def _shot(obs: Any, image_size: tuple[int, int]) -> Image.Image:
    """An observation's screenshot as the model sees it (RGB, resized to the image size)."""
    return as_model_sees(obs.screenshot, image_size)
