"""`HFServer`: the `hf` rollout's server, transformers `generate` on CPU behind verl's token-in/token-out API.

For CPU runs and tests only; production rollouts use vLLM/SGLang. A plain class: `HFReplica` wraps it with
`ray.remote` and verl's `LLMServerClient` calls `generate` on the actor. One request runs at a time (an
`asyncio.Lock` shared with `load_weights`), in a worker thread so the actor keeps answering control calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
)
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.tokenizer import get_processor_token_id
from verl.workers.config import HFModelConfig, RolloutConfig
from verl.workers.rollout.replica import TokenOutput
from verl.workers.rollout.utils import get_vision_placeholder_token_ids

logger = logging.getLogger(__name__)

# Wrapper prefixes a trainer's parameter names may carry (FSDP1, activation checkpointing, torch.compile, DDP).
_WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.", "module.")
# transformers<5 checkpoint layout of Qwen-VL models -> the live transformers 5 layout.
_LEGACY_PREFIXES = (("model.", "model.language_model."), ("visual.", "model.visual."))


class BannedTokens(LogitsProcessor):
    """Sets the logits of banned token ids (vision placeholders, ids past the tokenizer) to -inf."""

    def __init__(self, token_ids: torch.Tensor):
        self.token_ids = token_ids

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Mask the banned ids in `scores` (batch, vocab)."""
        return mask_banned(scores, self.token_ids)


def mask_banned(logits: torch.Tensor, banned: torch.Tensor) -> torch.Tensor:
    """A copy of `logits` (..., vocab) with the `banned` ids set to -inf."""
    logits = logits.clone()
    if banned.numel():
        logits[..., banned] = float("-inf")
    return logits


def is_vision_language(hf_config: Any) -> bool:
    """Whether a transformers config describes an image-text-to-text model."""
    return getattr(hf_config, "vision_config", None) is not None


def max_position_embeddings(hf_config: Any) -> int:
    """The model's context length (`max_position_embeddings`, looked up in `text_config` too)."""
    for cfg in (hf_config, getattr(hf_config, "text_config", None)):
        value = getattr(cfg, "max_position_embeddings", None)
        if value is not None:
            return int(value)
    raise ValueError("hf rollout: max_position_embeddings not found in the model config; set rollout.max_model_len")


def load_model(model_config: HFModelConfig) -> PreTrainedModel:
    """Load the policy on CPU in float32 with sdpa attention, in eval mode, without a hub generation config."""
    hf_config = copy.deepcopy(model_config.hf_config)
    auto_cls = AutoModelForImageTextToText if is_vision_language(hf_config) else AutoModelForCausalLM
    model = auto_cls.from_pretrained(
        model_config.local_path,
        config=hf_config,
        dtype=torch.float32,
        attn_implementation="sdpa",
        trust_remote_code=model_config.trust_remote_code,
    )
    model.eval().requires_grad_(False)
    model.generation_config = GenerationConfig()  # verl's sampling settings only, never the hub's defaults
    return model


def stop_token_ids(model_config: HFModelConfig) -> list[int]:
    """EOS ids the model stops on by default: the tokenizer's and the hub generation config's (as vLLM does)."""
    ids = [getattr(model_config.tokenizer, "eos_token_id", None)]
    eos = getattr(model_config.generation_config, "eos_token_id", None)
    ids += eos if isinstance(eos, list | tuple) else [eos]
    return sorted({int(i) for i in ids if i is not None})


def truncate_at_stop(token_ids: list[int], stop_ids: Iterable[int]) -> list[int]:
    """`token_ids` up to and including the first stop id (drops the padding `generate` adds after it)."""
    stops = set(stop_ids)
    for index, token in enumerate(token_ids):
        if token in stops:
            return token_ids[: index + 1]
    return token_ids


def sampled_log_probs(
    logits: tuple[torch.Tensor, ...], token_ids: list[int], banned: torch.Tensor, temperature: float
) -> list[float]:
    """log_softmax(masked raw logits / T) of each sampled token (T=1 when greedy), as vLLM's processed logprobs."""
    steps = torch.stack([step[0] for step in logits[: len(token_ids)]]).float()
    scaled = mask_banned(steps, banned) / (temperature if temperature > 0 else 1.0)
    log_probs = torch.log_softmax(scaled, dim=-1)
    return log_probs.gather(-1, torch.tensor(token_ids).unsqueeze(-1)).squeeze(-1).tolist()


def normalize_param_name(name: str, known: Mapping[str, Any]) -> str | None:
    """Map a trainer parameter name onto a key of `known` (strips wrapper prefixes, maps the legacy VL layout)."""
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    if name in known:
        return name
    for old, new in _LEGACY_PREFIXES:
        if name.startswith(old) and not name.startswith(new) and new + name[len(old) :] in known:
            return new + name[len(old) :]
    return None


class HFServer:
    """One `hf` rollout server: a CPU transformers model answering verl's `generate` and lifecycle calls."""

    def __init__(
        self,
        config: Any,
        model_config: Any,
        replica_rank: int = 0,
        num_cpus: int | None = None,
    ):
        self.config: RolloutConfig = omega_conf_to_dataclass(config, dataclass_type=RolloutConfig)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.replica_rank = replica_rank
        if num_cpus:
            torch.set_num_threads(int(num_cpus))
        self.tokenizer = self.model_config.tokenizer
        self.processor = self.model_config.processor
        self.model = load_model(self.model_config)
        self.is_vl = is_vision_language(self.model.config)
        self.max_model_len = min(
            self.config.max_model_len or max_position_embeddings(self.model.config),
            max_position_embeddings(self.model.config),
        )
        self.eos_token_ids = stop_token_ids(self.model_config)
        self.pad_token_id = self._pad_token_id()
        self.banned_token_ids = self._banned_token_ids()
        self.image_token_id = get_processor_token_id(self.processor, "image")
        self.video_token_id = get_processor_token_id(self.processor, "video")
        self.global_steps: int | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    async def init(self) -> bool:
        """Ready check: the model is loaded once the actor's constructor has returned."""
        return True

    # ---- generation -----------------------------------------------------------------------------------------

    async def generate(
        self,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        audio_data: list[Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """Token-in/token-out generation for one request (verl's `LLMServerClient.generate` contract)."""
        if video_data or audio_data:
            raise NotImplementedError("hf rollout supports text and image inputs only; use vLLM/SGLang for video/audio")
        prompt_ids = [int(t) for t in prompt_ids]
        params = dict(sampling_params)
        async with self._get_lock():
            token_ids, log_probs = await asyncio.to_thread(
                self._generate_blocking, prompt_ids, params, image_data, mm_processor_kwargs or {}
            )
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    @torch.no_grad()
    def _generate_blocking(
        self,
        prompt_ids: list[int],
        params: dict[str, Any],
        image_data: list[Any] | None,
        mm_kwargs: dict[str, Any],
    ) -> tuple[list[int], list[float] | None]:
        """Run `model.generate` for one prompt; returns response ids and (when asked) their log-probs."""
        if params.get("prompt_logprobs"):
            raise NotImplementedError("hf rollout does not compute prompt_logprobs; use vLLM/SGLang")
        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
        inputs.update(self._vision_inputs(input_ids, image_data, mm_kwargs))
        stop_ids = self._stop_ids(params)
        generation_config, temperature = self._generation_config(params, len(prompt_ids), stop_ids)
        seed = self._seed(params)
        rng = torch.random.fork_rng(devices=[]) if seed is not None else contextlib.nullcontext()
        with rng:
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(
                **inputs,
                generation_config=generation_config,
                logits_processor=LogitsProcessorList([BannedTokens(self.banned_token_ids)]),
            )
        token_ids = truncate_at_stop(out.sequences[0, len(prompt_ids) :].tolist(), stop_ids)
        if not params.get("logprobs"):
            return token_ids, None
        return token_ids, sampled_log_probs(out.logits, token_ids, self.banned_token_ids, temperature)

    def _generation_config(
        self, params: dict[str, Any], prompt_len: int, stop_ids: list[int]
    ) -> tuple[GenerationConfig, float]:
        """A fresh GenerationConfig from vLLM-style sampling params, and the temperature the log-probs use."""
        temperature = float(params.get("temperature", self.config.temperature) or 0.0)
        greedy = temperature <= 1e-5  # vLLM's _SAMPLING_EPS
        sampling = {"do_sample": False}
        if not greedy:
            top_k = int(params.get("top_k", -1) or 0)
            sampling = {
                "do_sample": True,
                "temperature": temperature,
                "top_k": max(0, top_k),
                "top_p": float(params.get("top_p", 1.0)),
            }
        generation_config = GenerationConfig(
            max_new_tokens=self._max_new_tokens(params, prompt_len),
            min_new_tokens=0,
            num_beams=1,
            repetition_penalty=float(params.get("repetition_penalty", self.config.repetition_penalty)),
            eos_token_id=stop_ids or None,
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
            output_logits=True,
            use_cache=True,
            **sampling,
        )
        return generation_config, 0.0 if greedy else temperature

    def _max_new_tokens(self, params: dict[str, Any], prompt_len: int) -> int:
        """vLLM's rule: max_tokens/max_new_tokens if given, else the response budget; clamped to the context."""
        room = self.max_model_len - prompt_len
        if room < 1:
            raise ValueError(
                f"hf rollout: prompt length {prompt_len} leaves no room in max_model_len {self.max_model_len}; "
                "shorten the prompt or raise rollout.max_model_len"
            )
        if params.get("max_tokens") is not None:
            wanted = int(params["max_tokens"])
        elif params.get("max_new_tokens") is not None:
            wanted = int(params["max_new_tokens"])
        else:
            budget = self.config.prompt_length + self.config.response_length - prompt_len
            wanted = min(self.config.response_length, budget)
        return max(1, min(wanted, room))

    def _stop_ids(self, params: dict[str, Any]) -> list[int]:
        """Token ids that end generation: model EOS (unless ignore_eos) plus the request's stop_token_ids."""
        ignore_eos = params.get("ignore_eos", self.config.ignore_eos)
        ids = [] if ignore_eos else list(self.eos_token_ids)
        ids += [int(t) for t in params.get("stop_token_ids") or []]
        return sorted(set(ids))

    def _seed(self, params: dict[str, Any]) -> int | None:
        """The request's seed, else replica_rank + rollout.seed under full_determinism (as vLLM), else None."""
        if params.get("seed") is not None:
            return int(params["seed"])
        if self.config.full_determinism:
            return self.replica_rank + self.config.seed
        return None

    def _vision_inputs(
        self, input_ids: torch.Tensor, image_data: list[Any] | None, mm_kwargs: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        """pixel_values/image_grid_thw for the images and mm_token_type_ids (M-RoPE) for a VL model."""
        n_pads = int((input_ids == self.image_token_id).sum()) if self.image_token_id is not None else 0
        inputs: dict[str, torch.Tensor] = {}
        if image_data:
            if self.processor is None or not self.is_vl:
                raise ValueError("hf rollout: got image_data but the model has no image processor/vision tower")
            features = self.processor.image_processor(images=list(image_data), return_tensors="pt", **mm_kwargs)
            merge = int(getattr(self.processor.image_processor, "merge_size", 1))
            needed = int(features["image_grid_thw"].prod(-1).sum()) // merge**2
            if needed != n_pads:
                raise ValueError(
                    f"hf rollout: prompt_ids hold {n_pads} image placeholder tokens but the {len(image_data)} image(s) "
                    f"need {needed}; build prompt_ids with this model's processor on the same images (expanded pads)"
                )
            inputs["pixel_values"] = features["pixel_values"].to(torch.float32)
            inputs["image_grid_thw"] = features["image_grid_thw"]
        elif n_pads:
            raise ValueError(f"hf rollout: prompt_ids hold {n_pads} image placeholder tokens but no image_data came")
        if self.is_vl:
            types = torch.zeros_like(input_ids, dtype=torch.int)
            for token_id, kind in ((self.image_token_id, 1), (self.video_token_id, 2)):
                if token_id is not None:
                    types[input_ids == token_id] = kind
            inputs["mm_token_type_ids"] = types
        return inputs

    def _pad_token_id(self) -> int | None:
        """The tokenizer's pad id, else its first EOS id."""
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is None and self.eos_token_ids:
            pad = self.eos_token_ids[0]
        return pad

    def _banned_token_ids(self) -> torch.Tensor:
        """Ids never to sample: vision placeholders and the embedding rows past the tokenizer's vocabulary."""
        vocab = self.model.get_output_embeddings().weight.shape[0]
        banned = set(range(len(self.tokenizer), vocab))
        banned.update(int(t) for t in get_vision_placeholder_token_ids(self.processor) if int(t) < vocab)
        return torch.tensor(sorted(banned), dtype=torch.long)

    def _get_lock(self) -> asyncio.Lock:
        """The lock serialising generate/load_weights, (re)created for the running event loop."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    # ---- weights --------------------------------------------------------------------------------------------

    async def load_weights(self, named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy trainer tensors into the model in place (dtype cast); returns how many were loaded."""
        items = list(named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors)
        async with self._get_lock():
            return await asyncio.to_thread(self._load_weights_blocking, items)

    @torch.no_grad()
    def _load_weights_blocking(self, items: list[tuple[str, torch.Tensor]]) -> int:
        """Resolve every name first (all or nothing), then copy."""
        state = self._named_tensors()
        resolved, unknown = [], []
        for name, tensor in items:
            key = normalize_param_name(name, state)
            if key is None:
                unknown.append(name)
            else:
                resolved.append((key, tensor))
        if unknown:
            raise KeyError(
                f"hf rollout: {len(unknown)} weight name(s) match no model parameter, e.g. {unknown[:3]}; "
                f"model keys look like {list(state)[:3]}"
            )
        for key, tensor in resolved:
            target = state[key]
            if tuple(target.shape) != tuple(tensor.shape):
                raise ValueError(
                    f"hf rollout: weight {key} has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}"
                )
            target.copy_(tensor.detach().to(device=target.device, dtype=target.dtype))
        return len(resolved)

    def _named_tensors(self) -> dict[str, torch.Tensor]:
        """Every name a weight may arrive under: state_dict keys plus tied aliases (e.g. lm_head.weight)."""
        named = dict(self.model.state_dict())
        named.update(self.model.named_parameters(remove_duplicate=False))
        named.update(self.model.named_buffers(remove_duplicate=False))
        return named

    # ---- lifecycle (no-ops on CPU: no KV cache to free, no engine to pause) ---------------------------------

    async def set_global_steps(self, global_steps: int | None) -> None:
        """Record the weights' training step; returned in every TokenOutput's extra_fields."""
        self.global_steps = global_steps

    async def wake_up(self, tags: list[str] | None = None) -> None:
        """No-op: the CPU model stays resident."""

    async def sleep(self) -> None:
        """No-op: the CPU model stays resident."""

    async def clear_kv_cache(self) -> None:
        """No-op: `generate` builds a fresh cache per request."""

    async def release_kv_cache(self) -> None:
        """No-op: there is no persistent KV cache."""

    async def resume_kv_cache(self) -> None:
        """No-op: there is no persistent KV cache."""

    async def resume_generation(self) -> None:
        """No-op: requests are never paused."""

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        """Nothing to abort: a running `generate` always completes."""
        return {"aborted_count": 0, "request_ids": []}

    async def start_profile(self, **kwargs: Any) -> None:
        """No-op: no profiler for the hf backend."""

    async def stop_profile(self) -> None:
        """No-op: no profiler for the hf backend."""
