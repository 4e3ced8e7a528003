"""`Generator`: transformers `generate` for one prompt of token ids (and its images) on CPU, with the rules the `hf`
rollout and `verl-cua serve` share: vision placeholders and ids past the tokenizer never sampled, padding after
the first stop id dropped, vLLM-style log-probs of the sampled tokens, seeded sampling that leaves the global RNG
alone.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
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
    raise ValueError("max_position_embeddings not found in the model config; set rollout.max_model_len")


def load_model(path: str | Path, hf_config: Any = None, trust_remote_code: bool = False) -> PreTrainedModel:
    """Load a policy on CPU in float32 with sdpa attention, in eval mode, without a hub generation config."""
    if hf_config is None:
        from transformers import AutoConfig

        hf_config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    hf_config = copy.deepcopy(hf_config)
    auto_cls = AutoModelForImageTextToText if is_vision_language(hf_config) else AutoModelForCausalLM
    model = auto_cls.from_pretrained(
        path, config=hf_config, dtype=torch.float32, attn_implementation="sdpa", trust_remote_code=trust_remote_code
    )
    model.eval().requires_grad_(False)
    model.generation_config = GenerationConfig()  # the caller's sampling settings only, never the hub's defaults
    return model


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


@dataclass(frozen=True)
class Prompt:
    """One request of a batch: its prompt ids, its images and its own token budget."""

    ids: list[int]
    images: list[Any] | None
    max_new_tokens: int


@dataclass(frozen=True)
class Sampling:
    """One request's decoding settings (vLLM's meaning: temperature <= 1e-5 is greedy, top_k <= 0 is off)."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0
    stop_ids: tuple[int, ...] = ()
    seed: int | None = None
    logprobs: bool = False

    @property
    def greedy(self) -> bool:
        """Whether this is greedy decoding (vLLM's _SAMPLING_EPS)."""
        return self.temperature <= 1e-5


class Generator:
    """A loaded model, its processor and tokenizer, and the one way both CPU servers generate with them."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: Any,
        processor: Any = None,
        pad_token_id: int | None = None,
        name: str = "hf rollout",
    ):
        from verl.utils.tokenizer import get_processor_token_id

        self.name = name  # starts every error message
        self.pad_token_id = pad_token_id
        self.model = model
        self.tokenizer = tokenizer
        self.processor = processor
        self.is_vl = is_vision_language(model.config)
        self.image_token_id = get_processor_token_id(processor, "image")
        self.video_token_id = get_processor_token_id(processor, "video")
        self.banned_token_ids = self._banned_token_ids()

    def generate(
        self,
        prompt_ids: list[int],
        sampling: Sampling,
        images: list[Any] | None = None,
        mm_kwargs: dict[str, Any] | None = None,
        streamer: Any = None,
    ) -> tuple[list[int], list[float] | None]:
        """Response ids for one prompt (up to and including the first stop id) and, if asked, their log-probs;
        `streamer` (a transformers `BaseStreamer`) gets each token as it is sampled."""
        prompt = Prompt(prompt_ids, images, sampling.max_new_tokens)
        return self.generate_batch([prompt], sampling, mm_kwargs, streamer)[0]

    @torch.no_grad()
    def generate_batch(
        self,
        prompts: list[Prompt],
        sampling: Sampling,
        mm_kwargs: dict[str, Any] | None = None,
        streamer: Any = None,
    ) -> list[tuple[list[int], list[float] | None]]:
        """One `generate` call for several prompts that share `sampling` (left-padded; each row keeps its own
        `max_new_tokens`): per prompt, its response ids up to its first stop id and, if asked, their log-probs."""
        if len(prompts) > 1 and sampling.seed is not None:
            raise ValueError(f"{self.name}: a seeded request is generated alone (its RNG stream is its own)")
        if len(prompts) > 1 and streamer is not None:
            raise ValueError(f"{self.name}: a streamed request is generated alone")
        width = max(len(p.ids) for p in prompts)
        pad = self.pad_token_id if self.pad_token_id is not None else 0
        input_ids = torch.tensor([[pad] * (width - len(p.ids)) + list(p.ids) for p in prompts], dtype=torch.long)
        attention_mask = torch.tensor([[0] * (width - len(p.ids)) + [1] * len(p.ids) for p in prompts])
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        inputs.update(self._batch_vision_inputs(input_ids, attention_mask, prompts, mm_kwargs or {}))
        config = self._generation_config(replace(sampling, max_new_tokens=max(p.max_new_tokens for p in prompts)))
        seeded = sampling.seed is not None
        with torch.random.fork_rng(devices=[]) if seeded else contextlib.nullcontext():
            if seeded:
                torch.manual_seed(sampling.seed)
            out = self.model.generate(
                **inputs,
                generation_config=config,
                logits_processor=LogitsProcessorList([BannedTokens(self.banned_token_ids)]),
                streamer=streamer,
            )
        temperature = 0.0 if sampling.greedy else sampling.temperature
        results = []
        for row, prompt in enumerate(prompts):
            new = out.sequences[row, width : width + prompt.max_new_tokens].tolist()
            token_ids = truncate_at_stop(new, sampling.stop_ids)
            if not sampling.logprobs:
                results.append((token_ids, None))
                continue
            logits = tuple(step[row : row + 1] for step in out.logits)
            results.append((token_ids, sampled_log_probs(logits, token_ids, self.banned_token_ids, temperature)))
        return results

    def _batch_vision_inputs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompts: list[Prompt], mm_kwargs: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        """The vision inputs of every row, checked row by row, concatenated in row order (M-RoPE types padded)."""
        rows = [self.vision_inputs(input_ids[i : i + 1][attention_mask[i : i + 1] == 1].unsqueeze(0), p.images,
                                   mm_kwargs) for i, p in enumerate(prompts)]  # fmt: skip
        if len(rows) == 1:
            return rows[0]
        inputs: dict[str, torch.Tensor] = {}
        for key in ("pixel_values", "image_grid_thw"):
            parts = [r[key] for r in rows if key in r]
            if parts:
                inputs[key] = torch.cat(parts)
        if self.is_vl:
            types = torch.zeros_like(input_ids, dtype=torch.int)
            for i, r in enumerate(rows):
                types[i, input_ids.shape[1] - r["mm_token_type_ids"].shape[1] :] = r["mm_token_type_ids"][0]
            inputs["mm_token_type_ids"] = types
        return inputs

    def _generation_config(self, sampling: Sampling) -> GenerationConfig:
        """A fresh GenerationConfig for `sampling` (logits kept when log-probs are asked for)."""
        decoding: dict[str, Any] = {"do_sample": False}
        if not sampling.greedy:
            decoding = {
                "do_sample": True,
                "temperature": sampling.temperature,
                "top_k": max(0, int(sampling.top_k or 0)),
                "top_p": float(sampling.top_p),
            }
        return GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            min_new_tokens=0,
            num_beams=1,
            repetition_penalty=float(sampling.repetition_penalty),
            eos_token_id=list(sampling.stop_ids) or None,
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
            output_logits=sampling.logprobs,  # every step's logits: only when log-probs are asked for
            use_cache=True,
            **decoding,
        )

    def vision_inputs(
        self, input_ids: torch.Tensor, images: list[Any] | None, mm_kwargs: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        """pixel_values/image_grid_thw for the images and mm_token_type_ids (M-RoPE) for a VL model."""
        n_pads = int((input_ids == self.image_token_id).sum()) if self.image_token_id is not None else 0
        inputs: dict[str, torch.Tensor] = {}
        if images:
            if self.processor is None or not self.is_vl:
                raise ValueError(f"{self.name}: got image_data but the model has no image processor/vision tower")
            features = self.processor.image_processor(images=list(images), return_tensors="pt", **mm_kwargs)
            merge = int(getattr(self.processor.image_processor, "merge_size", 1))
            needed = int(features["image_grid_thw"].prod(-1).sum()) // merge**2
            if needed != n_pads:
                raise ValueError(
                    f"{self.name}: prompt_ids hold {n_pads} image placeholder tokens but the {len(images)} "
                    f"image(s) need {needed}; build prompt_ids with this model's processor on the same images "
                    "(expanded pads)"
                )
            inputs["pixel_values"] = features["pixel_values"].to(torch.float32)
            inputs["image_grid_thw"] = features["image_grid_thw"]
        elif n_pads:
            raise ValueError(f"{self.name}: prompt_ids hold {n_pads} image placeholder tokens but no image_data came")
        if self.is_vl:
            types = torch.zeros_like(input_ids, dtype=torch.int)
            for token_id, kind in ((self.image_token_id, 1), (self.video_token_id, 2)):
                if token_id is not None:
                    types[input_ids == token_id] = kind
            inputs["mm_token_type_ids"] = types
        return inputs

    def _banned_token_ids(self) -> torch.Tensor:
        """Ids never to sample: vision placeholders and the embedding rows past the tokenizer's vocabulary."""
        from verl.workers.rollout.utils import get_vision_placeholder_token_ids

        vocab = self.model.get_output_embeddings().weight.shape[0]
        banned = set(range(len(self.tokenizer), vocab))
        banned.update(int(t) for t in get_vision_placeholder_token_ids(self.processor) if int(t) < vocab)
        return torch.tensor(sorted(banned), dtype=torch.long)
