"""`HFServer`: the `hf` rollout's server, transformers `generate` on CPU behind verl's token-in/token-out API.

For CPU runs and tests only; production rollouts use vLLM/SGLang. A plain class: `HFReplica` wraps it with
`ray.remote` and verl's `LLMServerClient` calls `generate` on the actor. Requests that arrive while a generation
runs wait, and then go as one batch (those with the same sampling settings; a seeded one, or one with a repetition
penalty, alone), so a step's concurrent episodes share forward passes: greedy rows get the tokens they get alone,
with log-probs equal up to float noise; sampled rows draw from the same distributions. One batch runs at a time (an
`asyncio.Lock` shared with `load_weights`), in a worker thread so the actor keeps answering control calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig, RolloutConfig
from verl.workers.rollout.replica import TokenOutput

from verl_cua.integrations.hf_generation import (
    Generator,
    Prompt,
    Sampling,
    load_model,
    max_position_embeddings,
)
from verl_cua.integrations.verl.hf_rollout.lora import LoraSlot
from verl_cua.integrations.verl.hf_rollout.names import normalize_param_name

__all__ = ["HFServer", "normalize_param_name", "stop_token_ids"]

logger = logging.getLogger(__name__)

# requests in one batched generate (`rollout.engine_kwargs.hf.max_batch`); a batch that returns log-probs holds every
# step's logits of every row (rows x tokens x vocabulary floats) until it ends
DEFAULT_MAX_BATCH = 8


@dataclass(eq=False)  # compared by identity
class _Request:
    """A request waiting for its batch: its prompt, its sampling, and the future its caller awaits."""

    prompt: Prompt
    sampling: Sampling
    mm_kwargs: dict[str, Any]
    future: asyncio.Future

    def batch_key(self) -> tuple:
        """Requests with equal keys can share one `generate` call (the token budget is per row). Alone: a seeded
        request (its own RNG stream) and one with a repetition penalty (it would count the batch's left padding)."""
        if self.sampling.seed is not None or self.sampling.repetition_penalty != 1.0:
            return (id(self),)
        return (replace(self.sampling, max_new_tokens=0), repr(sorted(self.mm_kwargs.items())))


def stop_token_ids(model_config: HFModelConfig) -> list[int]:
    """EOS ids the model stops on by default: the tokenizer's and the hub generation config's (as vLLM does)."""
    ids = [getattr(model_config.tokenizer, "eos_token_id", None)]
    eos = getattr(model_config.generation_config, "eos_token_id", None)
    ids += eos if isinstance(eos, list | tuple) else [eos]
    return sorted({int(i) for i in ids if i is not None})


def _settle(future: asyncio.Future, result: Any) -> None:
    """Give a waiting caller its tokens or its exception (a caller that went away is skipped)."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


class HFServer:
    """One `hf` rollout server: a CPU transformers model answering verl's `generate` and lifecycle calls."""

    def __init__(
        self,
        config: Any,
        model_config: Any,
        replica_rank: int = 0,
        num_cpus: int | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
    ):
        self.config: RolloutConfig = omega_conf_to_dataclass(config, dataclass_type=RolloutConfig)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.replica_rank = replica_rank
        self.max_batch = max(1, int(max_batch))
        if num_cpus:
            torch.set_num_threads(int(num_cpus))
        self.tokenizer = self.model_config.tokenizer
        self.processor = self.model_config.processor
        model = load_model(
            self.model_config.local_path, self.model_config.hf_config, self.model_config.trust_remote_code
        )
        self.max_model_len = min(
            self.config.max_model_len or max_position_embeddings(model.config),
            max_position_embeddings(model.config),
        )
        self.eos_token_ids = stop_token_ids(self.model_config)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is None and self.eos_token_ids:
            pad = self.eos_token_ids[0]
        self.generator = Generator(model, self.tokenizer, self.processor, pad_token_id=pad)
        self.model = model
        self.lora = LoraSlot(model)
        self.banned_token_ids = self.generator.banned_token_ids
        self.image_token_id = self.generator.image_token_id
        self.video_token_id = self.generator.video_token_id
        self.global_steps: int | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._waiting: list[_Request] = []
        self._batcher: asyncio.Task | None = None
        self.batch_sizes: Counter[int] = Counter()  # how many batches of each size ran (tests read it)

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
        if params.get("prompt_logprobs"):
            raise NotImplementedError("hf rollout does not compute prompt_logprobs; use vLLM/SGLang")
        sampling = self._sampling(params, len(prompt_ids))
        prompt = Prompt(prompt_ids, list(image_data) if image_data else None, sampling.max_new_tokens)
        future = asyncio.get_running_loop().create_future()
        request = _Request(prompt, sampling, dict(mm_processor_kwargs or {}), future)
        self._waiting.append(request)
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._run_batches())
        token_ids, log_probs = await request.future
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def _run_batches(self) -> None:
        """Generate the waiting requests, a batch at a time, until none waits (new ones join the next batch). No
        request is left waiting: if this task itself ends abnormally (cancelled), every pending caller is told."""
        batch: list[_Request] = []
        try:
            while self._waiting:
                key = self._waiting[0].batch_key()
                batch = [r for r in self._waiting if r.batch_key() == key][: self.max_batch]
                self._waiting = [r for r in self._waiting if r not in batch]
                async with self._get_lock():
                    try:
                        results = await asyncio.to_thread(self._generate_batch, batch)
                    except Exception as exc:  # noqa: BLE001 - every caller gets its own request's outcome
                        results = await self._one_by_one(batch) if len(batch) > 1 else [exc]
                for request, result in zip(batch, results, strict=True):
                    _settle(request.future, result)
                batch = []
        except BaseException as exc:
            stranded, self._waiting = [*batch, *self._waiting], []
            for request in stranded:
                _settle(request.future, RuntimeError(f"hf rollout: generation stopped ({type(exc).__name__})"))
            raise

    async def _one_by_one(self, batch: list[_Request]) -> list[Any]:
        """A failed batch again, request by request: a bad request fails alone, the others get their tokens."""
        results: list[Any] = []
        for request in batch:
            try:
                results.append((await asyncio.to_thread(self._generate_batch, [request]))[0])
            except Exception as exc:  # noqa: BLE001
                results.append(exc)
        return results

    def _generate_batch(self, batch: list[_Request]) -> list[tuple[list[int], list[float] | None]]:
        """Run `model.generate` once for `batch` (same sampling); per request its ids and (when asked) log-probs."""
        self.batch_sizes[len(batch)] += 1
        prompts = [r.prompt for r in batch]
        return self.generator.generate_batch(prompts, batch[0].sampling, batch[0].mm_kwargs)

    def _sampling(self, params: dict[str, Any], prompt_len: int) -> Sampling:
        """vLLM-style sampling params (falling back to the rollout config) as one request's `Sampling`."""
        return Sampling(
            max_new_tokens=self._max_new_tokens(params, prompt_len),
            temperature=float(params.get("temperature", self.config.temperature) or 0.0),
            top_p=float(params.get("top_p", 1.0)),
            top_k=int(params.get("top_k", -1) or 0),
            repetition_penalty=float(params.get("repetition_penalty", self.config.repetition_penalty)),
            stop_ids=tuple(self._stop_ids(params)),
            seed=self._seed(params),
            logprobs=bool(params.get("logprobs")),
        )

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
        return self.generator.vision_inputs(input_ids, image_data, mm_kwargs)

    def _get_lock(self) -> asyncio.Lock:
        """The lock serialising generate/load_weights, (re)created for the running event loop."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    # ---- weights --------------------------------------------------------------------------------------------

    async def load_weights(self, named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy trainer tensors into the model in place (dtype cast, LoRA `.base_layer` names too); returns a count."""
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

    async def load_lora_adapter(
        self,
        peft_config: Mapping[str, Any],
        named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
    ) -> int:
        """Replace the served LoRA adapter (vLLM's remove_lora + add_lora); returns how many tensors it took."""
        items = list(named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors)
        async with self._get_lock():
            return await asyncio.to_thread(self.lora.load, peft_config, items)

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
