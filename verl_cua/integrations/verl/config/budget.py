"""Token budgets of a training config, checked before Ray starts: what a screenshot costs in tokens, what a step
row, a whole-episode row and an SDPO teacher row need, and whether the config's lengths hold them.

Estimates, not tokenizations: text is counted at 3 characters a token (Qwen's tokenizers average about 4 on
English and code, so the estimate errs long); a screenshot's count is exact (the processor's resize arithmetic)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.actions.geometry import smart_resize_size
from verl_cua.actions.prompts import build_prompt, longest_turn_context, observation_text
from verl_cua.envs import env_screen
from verl_cua.envs.observation import CHARS_PER_TOKEN  # the env trims its element table by the same count
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.schema import CuaConfig, EnvConfig
from verl_cua.integrations.verl.estimator_plan import plan_for

INSTRUCTION_TOKENS = 200  # a task instruction (OSWorld's longest are ~150 tokens)
ACTION_HISTORY_CHARS = 400  # step rows show each earlier action cut to this many characters
TURN_SCAFFOLD_TOKENS = 16  # <|im_start|>user ... <|im_end|> and the vision start/end tokens of one turn

SERVED_ROLLOUTS = ("vllm", "sglang")  # rollouts behind an inference server, whose context (max_model_len) we set


@dataclass(frozen=True)
class Geometry:
    """A model's image geometry: pixels per merged patch side and the processor's own pixel cap."""

    factor: int
    cap: int


@dataclass(frozen=True)
class RowBudget:
    """Token needs of a config's rows, next to the lengths it gives them."""

    image_size: tuple[int, int]
    image_tokens: int
    system_tokens: int
    step_prompt: int  # a step row's prompt: system, instruction, earlier actions, history_images screenshots
    turn: int  # one more turn of a whole-episode row: the answer, the next screenshot and its text
    episode_response: int  # a whole-episode row's response at max_steps turns
    teacher_extra: int  # what SDPO's teacher context adds to a row: demo, feedback, final screenshot
    prompt_length: int
    response_length: int

    @property
    def teacher_row(self) -> int:
        """The longest SDPO teacher row: the student row plus the teacher context."""
        return self.prompt_length + self.response_length + self.teacher_extra


def model_geometry(model_path: str) -> Geometry:
    """The processor geometry of `model_path` (its preprocessor_config.json, local or in the HF cache); Qwen's
    defaults by name when the file is not on this machine (patch 16 for Qwen3-VL, 14 otherwise; merge 2)."""
    config = _preprocessor_config(model_path)
    if config:
        factor = int(config.get("patch_size", 14)) * int(config.get("merge_size", 2))
        size = config.get("size") or {}
        cap = size.get("longest_edge") or size.get("max_pixels") or config.get("max_pixels") or 16384 * factor**2
        return Geometry(factor, int(cap))
    factor = 32 if "qwen3" in model_path.lower() else 28
    return Geometry(factor, 16384 * factor**2)


def _preprocessor_config(model_path: str) -> dict[str, Any] | None:
    path = Path(model_path).expanduser() / "preprocessor_config.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model_path, "preprocessor_config.json")
        except Exception:  # not a repo id, or no huggingface_hub: fall back to the name
            return None
        if not isinstance(cached, str):
            return None
        path = Path(cached)
    return json.loads(path.read_text())


def image_tokens(screen: tuple[int, int], geometry: Geometry, max_pixels: int) -> tuple[tuple[int, int], int]:
    """The size a `screen` screenshot is resized to under `max_pixels`, and its image tokens (merged patches)."""
    cap = min(max_pixels, geometry.cap)
    size = smart_resize_size(screen, geometry.factor, geometry.factor**2, cap)
    return size, (size[0] // geometry.factor) * (size[1] // geometry.factor)


OBSERVATION_FRAME_TOKENS = 64  # the element table's title and header, and the line that says where it was cut


def _table_tokens(env: EnvConfig) -> int:
    """What `cua.env.observation`'s element table or marks may add to a turn: its budget and frame; 0 for none."""
    return 0 if env.observation == "screenshot" else env.observation_tokens + OBSERVATION_FRAME_TOKENS


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def row_budget(config: Mapping[str, Any], geometry: Geometry | None = None) -> RowBudget:
    """The token needs of the resolved trainer `config` (a plain dict) for its model, env and row layout."""
    cua, data = CuaConfig.of(config["cua"]), config["data"]
    env, action, sdpo = cua.env, cua.action, cua.sdpo
    geometry = geometry or model_geometry(str(config["actor_rollout_ref"]["model"]["path"]))
    kwargs = env.kwargs
    try:
        screen = env_screen(env.name, kwargs)
    except ValueError as exc:  # an env registered without its screen size, or none of that name
        raise CuaConfigError(str(exc)) from None
    size, per_image = image_tokens(screen, geometry, env.max_pixels)
    spec = build_prompt(action.format, screen=screen, image=size, observation=env.observation)
    image = per_image + TURN_SCAFFOLD_TOKENS if spec.screenshot else 0  # a11y_tree: no screenshot in any prompt
    system = _tokens(spec.system) + TURN_SCAFFOLD_TOKENS
    history_text = (env.max_steps - 1) * (_tokens("Step 99: ") + ACTION_HISTORY_CHARS // CHARS_PER_TOKEN)
    step_prompt = system + INSTRUCTION_TOKENS + history_text + env.history_images * image
    context = _tokens(longest_turn_context(action.format))  # api_gui: the focused app's APIs and the last result
    context += _table_tokens(env)
    step_prompt += context + (env.history_images - 1) * _table_tokens(env)  # the window's older tables
    turn = action.max_tokens_per_step + image + _tokens(observation_text(99, "x" * 80)) + context
    episode_response = env.max_steps * turn
    teacher_extra = 0
    if plan_for(config.get("algorithm", {}).get("adv_estimator"), cua).teacher_pass:
        teacher_extra = TURN_SCAFFOLD_TOKENS + _tokens("x" * sdpo.max_feedback_chars)
        teacher_extra += sdpo.max_demo_tokens if sdpo.demo else 0
        teacher_extra += image if sdpo.final_screenshot else 0
    return RowBudget(
        image_size=size,
        image_tokens=per_image,
        system_tokens=system,
        step_prompt=step_prompt,
        turn=turn,
        episode_response=episode_response,
        teacher_extra=teacher_extra,
        prompt_length=int(data["max_prompt_length"]),
        response_length=int(data["max_response_length"]),
    )


def check_budget(config: Mapping[str, Any], budget: RowBudget | None = None) -> RowBudget:
    """Raise `CuaConfigError` (one line) when the config's rows cannot hold what its episodes put in them."""
    budget = budget or row_budget(config)
    cua = CuaConfig.of(config["cua"])
    env = cua.env
    images = budget.image_tokens + TURN_SCAFFOLD_TOKENS
    pixels = f"cua.env.max_pixels={env.max_pixels} ({budget.image_size[0]}x{budget.image_size[1]}"
    pixels += f", {budget.image_tokens} tokens a screenshot)"
    if env.rows == "step":
        need = budget.system_tokens + INSTRUCTION_TOKENS + env.history_images * images
        if budget.prompt_length < need:
            raise CuaConfigError(
                f"data.max_prompt_length={budget.prompt_length} cannot hold cua.env.history_images="
                f"{env.history_images} screenshots at {pixels}: needs >= {need}; raise it, or lower history_images "
                "or max_pixels"
            )
        table = _table_tokens(env)
        if table and budget.prompt_length < need + table:
            raise CuaConfigError(
                f"data.max_prompt_length={budget.prompt_length} cannot hold the screenshots and the element table "
                f"of cua.env.observation={env.observation} (cua.env.observation_tokens={env.observation_tokens}): "
                f"needs >= {need + table}; raise it, or lower observation_tokens"
            )
    else:
        need = budget.system_tokens + INSTRUCTION_TOKENS + images
        if budget.prompt_length < need:
            raise CuaConfigError(
                f"data.max_prompt_length={budget.prompt_length} cannot hold the first screenshot at {pixels}: "
                f"needs >= {need}"
            )
        if budget.response_length < 2 * budget.turn:
            per_turn = cua.action.max_tokens_per_step
            raise CuaConfigError(
                f"cua.env.rows=episode: data.max_response_length={budget.response_length} cannot hold two turns "
                f"({budget.turn} tokens each: cua.action.max_tokens_per_step={per_turn} and a screenshot at {pixels}); "
                f"a {env.max_steps}-step episode needs ~{budget.episode_response}: "
                "raise it or use cua.env.rows=step"
            )
    _check_teacher(config, budget)
    return budget


def _check_teacher(config: Mapping[str, Any], budget: RowBudget) -> None:
    """SDPO's teacher rows go through the actor's log-prob pass: with dynamic batching each must fit its token cap."""
    if not budget.teacher_extra:
        return
    actor = config["actor_rollout_ref"]["actor"]
    if not actor.get("use_dynamic_bsz"):
        return
    rollout = config["actor_rollout_ref"]["rollout"]
    cap = rollout.get("log_prob_max_token_len_per_gpu") or actor.get("ppo_max_token_len_per_gpu")
    if cap and int(cap) < budget.teacher_row:
        raise CuaConfigError(
            f"SDPO teacher rows reach {budget.teacher_row} tokens (the row plus cua.sdpo.max_demo_tokens, feedback and "
            f"a final screenshot: {budget.teacher_extra}) but actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"
            f"={cap}; raise it or lower cua.sdpo.max_demo_tokens"
        )


def rollout_max_model_len(config: Mapping[str, Any]) -> int:
    """The context vLLM/SGLang need: the longest row (prompt + response), not the model's whole context."""
    data = config["data"]
    return int(data["max_prompt_length"]) + int(data["max_response_length"])


PNG_BYTES_PER_PIXEL = 0.35  # screenshots of desktops as PNG (level 1): bench.memory measured 0.2-0.5 on OSWorld apps
FP32_PATCH_BYTES_PER_PIXEL = 3 * 2 * 4
TOKEN_TENSOR_BYTES = 8 * 8  # int64 per token: prompts/responses, input_ids, M-RoPE positions (4), masks, log-probs


@dataclass(frozen=True)
class StepMemory:
    """Host memory one training step holds in TransferQueue, by what it is made of."""

    rows: int
    images: int
    image_bytes: int
    token_bytes: int

    @property
    def total(self) -> int:
        """Bytes in TransferQueue a step."""
        return self.image_bytes + self.token_bytes


def step_memory(config: Mapping[str, Any], budget: RowBudget) -> StepMemory:
    """What a training step puts in TransferQueue at the config's batch, rows and image storage (an estimate: PNG
    sizes vary with the screen; fp32 patches are exact)."""
    cua, data = CuaConfig.of(config["cua"]), config["data"]
    env = cua.env
    episodes = int(data["train_batch_size"]) * int(config["actor_rollout_ref"]["rollout"]["n"])
    steps, history = env.max_steps, env.history_images
    if env.rows == "step":
        rows = episodes * steps
        images = episodes * sum(min(history, t + 1) for t in range(steps))
        tokens = rows * (budget.step_prompt + cua.action.max_tokens_per_step)
    else:
        rows = episodes
        images = episodes * steps
        tokens = rows * (budget.prompt_length + budget.response_length)
    pixels = budget.image_size[0] * budget.image_size[1]
    if env.image_storage == "png":
        per_image = int(pixels * PNG_BYTES_PER_PIXEL)
    else:  # pixels / patch^2 patches of 3 channels x 2 frames x patch^2 values, fp32: 24 bytes a pixel
        per_image = pixels * FP32_PATCH_BYTES_PER_PIXEL
    return StepMemory(rows=rows, images=images, image_bytes=images * per_image, token_bytes=tokens * TOKEN_TENSOR_BYTES)
