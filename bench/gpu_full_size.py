"""The full-size checks of `bench.gpu_smoke`: Qwen3-VL-8B's memory at the flagship's step without its weights.

A randomly initialised Qwen3-VL-8B built from its architecture numbers (`QWEN3VL_8B`, no hub), one flagship step row
(`FLAGSHIP_ROW`) forward and backward, one no-grad teacher micro-batch with SDPO's top-100 gather, and FSDP2's per-rank
state by arithmetic (`fsdp2_state_per_rank`). `SMOKE_ARCH` is the same layout shrunk for CI's `--smoke`.
"""

from __future__ import annotations

import math
import time
from typing import Any

# Qwen3-VL-8B's architecture as Qwen3VLConfig's arguments (the numbers of its published config.json, written here: no
# hub); transformers 5 names the rotary settings `rope_parameters` (4.x: `rope_scaling`, with `rope_theta` beside it)
QWEN3VL_8B = {
    "text_config": {
        "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-6, "attention_bias": False,
        "rope_parameters": {
            "rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20], "mrope_interleaved": True,
        },
    },
    "vision_config": {
        "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
        "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 4096,
        "deepstack_visual_indexes": [8, 16, 24], "num_position_embeddings": 2304,
    },
    "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652, "vision_end_token_id": 151653,
    "tie_word_embeddings": False,
}  # fmt: skip


def _shrunk(arch: dict, text: dict, vision: dict, **top) -> dict:
    """`arch` with some of its text, vision and top-level numbers replaced."""
    return {**arch, "text_config": {**arch["text_config"], **text},
            "vision_config": {**arch["vision_config"], **vision}, **top}  # fmt: skip


# the same layout shrunk for `--smoke` (head_dim 32: M-RoPE sections over its 16 frequencies; special ids at the top)
SMOKE_ARCH = _shrunk(
    QWEN3VL_8B,
    text={"vocab_size": 4096, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 4096,
          "rope_parameters": {**QWEN3VL_8B["text_config"]["rope_parameters"], "mrope_section": [6, 5, 5]}},
    vision={"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2, "out_hidden_size": 128,
            "deepstack_visual_indexes": [0], "num_position_embeddings": 64},
    image_token_id=4094, video_token_id=4095, vision_start_token_id=4092, vision_end_token_id=4093,
)  # fmt: skip
# the flagship's step row (recipes/run_qwen3vl_sdpo_osworld.sh): OSWorld's 1920x1080 screen, HISTORY_IMAGES=3 at
# MAX_PIXELS=1003520, ~6k tokens a row, MAX_RESPONSE_LENGTH=1024
FLAGSHIP_ROW = {"screen": (1920, 1080), "screenshots": 3, "max_pixels": 1003520, "row_tokens": 6000, "response": 1024}


def qwen3vl_param_count(arch: dict) -> int:
    """Parameters of a dense Qwen3-VL from its architecture (`QWEN3VL_8B`'s layout), in closed form.

    text: V*H embeddings (+ V*H lm_head unless tied) + H final norm + L layers of
    H*d*(2*nh + 2*nkv) attention (+ d*(nh + 2*nkv) + H biases) + 2*d q/k norms + 3*H*I MLP + 2*H norms;
    vision (width D, MLP width I', C*T*P*P patch): C*T*P*P*D + D patch embedding + N*D position table + depth blocks of
    4*D*D + 4*D (qkv, proj) + 2*D*I' + I' + D (MLP) + 4*D (two LayerNorms); mergers on M = D*m*m: one with a D-wide
    LayerNorm and one per deepstack layer with an M-wide one, each M*M + M + M*O + O (two linears to out width O).
    """
    t, v = arch["text_config"], arch["vision_config"]
    h, d, nh, nkv = t["hidden_size"], t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"]
    attention = h * d * (2 * nh + 2 * nkv) + (d * (nh + 2 * nkv) + h if t.get("attention_bias") else 0)
    layer = attention + 2 * d + 3 * h * t["intermediate_size"] + 2 * h
    heads = 1 if arch.get("tie_word_embeddings") else 2
    text = heads * t["vocab_size"] * h + h + t["num_hidden_layers"] * layer
    dv, iv, out = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]
    patch = v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 * dv + dv
    block = 4 * dv * dv + 4 * dv + 2 * dv * iv + iv + dv + 4 * dv
    merged = dv * v["spatial_merge_size"] ** 2
    mergers = (1 + len(v["deepstack_visual_indexes"])) * (merged * merged + merged + merged * out + out)
    norms = 2 * dv + 2 * merged * len(v["deepstack_visual_indexes"])
    vision = patch + v["num_position_embeddings"] * dv + v["depth"] * block + mergers + norms
    return text + vision


def build_qwen3vl(arch: dict, device: str, dtype: str = "bfloat16") -> Any:
    """A randomly initialised Qwen3-VL of `arch`, built directly on `device` ("meta": shapes only) in `dtype`, sdpa."""
    import copy

    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    torch.manual_seed(0)
    config = Qwen3VLConfig(**copy.deepcopy(arch))
    with torch.device(device):
        return Qwen3VLForConditionalGeneration._from_config(
            config, dtype=getattr(torch, dtype), attn_implementation="sdpa"
        )


def screenshot_grid(arch: dict, screen: tuple[int, int], max_pixels: int) -> tuple[tuple[int, int], tuple[int, ...]]:
    """The (width, height) Qwen3-VL's processor resizes a `screen` screenshot to under `max_pixels`, and its patch
    grid (t, h, w): (h / P) x (w / P) patches of P pixels, merged m x m into image tokens."""
    from verl_cua.actions.geometry import QWEN3VL_RESIZE, capped_resize

    patch, merge = arch["vision_config"]["patch_size"], arch["vision_config"]["spatial_merge_size"]
    width, height = capped_resize(screen, {**QWEN3VL_RESIZE, "factor": patch * merge}, max_pixels)
    return (width, height), (1, height // patch, width // patch)


def _row_ids(arch: dict, chunks: list[int], pads: int, generator):
    """One row's ids: random text ids in `chunks` of tokens, a screenshot's `pads` image pads (between vision
    start and end) after each chunk but the last."""
    import torch

    top = min(arch[k] for k in ("image_token_id", "video_token_id", "vision_start_token_id"))  # text ids below
    image = torch.tensor([arch["vision_start_token_id"], *[arch["image_token_id"]] * pads, arch["vision_end_token_id"]])
    parts = [torch.randint(0, top, (chunks[0],), generator=generator)]
    for n in chunks[1:]:
        parts += [image, torch.randint(0, top, (n,), generator=generator)]
    return torch.cat(parts)


def step_rows(arch: dict, rows: int = 1, seed: int = 0, **row) -> dict:
    """`rows` step rows of one length (`FLAGSHIP_ROW`, overridden by `row`): text, then each screenshot's image pads
    and more text, the response last (the labels); the screenshots' patches [n, C*T*P*P] random. The model's inputs,
    the labels and the row's figures."""
    import torch

    row = {**FLAGSHIP_ROW, **row}
    v = arch["vision_config"]
    size, grid = screenshot_grid(arch, row["screen"], row["max_pixels"])
    pads = grid[1] * grid[2] // v["spatial_merge_size"] ** 2
    shots, length, response = row["screenshots"], row["row_tokens"], row["response"]
    text = length - shots * (pads + 2) - response
    if text < shots + 1:
        raise ValueError(f"a {length}-token row cannot hold {shots} screenshots of {pads} tokens and {response} more")
    chunks = [text // (shots + 1) + (i < text % (shots + 1)) for i in range(shots)] + [text // (shots + 1) + response]
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.stack([_row_ids(arch, chunks, pads, g) for _ in range(rows)])
    labels = torch.full_like(input_ids, -100)
    labels[:, -response:] = input_ids[:, -response:]
    channels = v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2
    inputs = {
        "input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
        "mm_token_type_ids": (input_ids == arch["image_token_id"]).int(),
        "pixel_values": torch.rand(rows * shots * grid[1] * grid[2], channels, generator=g) * 2 - 1,
        "image_grid_thw": torch.tensor([grid] * (rows * shots)),
    }  # fmt: skip
    figures = {"image": list(size), "tokens": length, "image_tokens": shots * pads, "response_tokens": response}
    return {"inputs": inputs, "labels": labels, "figures": figures}


def _fresh(device: str) -> None:
    """Free what an earlier check left on the device and zero its peak counter."""
    import gc

    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _gib(device: str, peak: bool = True) -> float | None:
    """The device's peak (or current) allocated memory in GiB; None off CUDA."""
    import torch

    if device != "cuda":
        return None
    return round((torch.cuda.max_memory_allocated() if peak else torch.cuda.memory_allocated()) / 2**30, 2)


def _seconds_since(t0: float, device: str) -> float:
    """Seconds since `t0`, after the device's queued work."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    return round(time.perf_counter() - t0, 3)


def full_size_step(device: str, arch: dict = QWEN3VL_8B, dtype: str = "bfloat16", **row) -> dict:
    """A random Qwen3-VL-8B (bf16, sdpa, gradient checkpointing, train mode) through one flagship step row: a forward
    with labels and a backward; its peak memory, seconds and parameter counts (counted and in closed form)."""
    import torch

    _fresh(device)
    model = build_qwen3vl(arch, device, dtype)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    batch = step_rows(arch, **row)
    inputs = {k: t.to(device) for k, t in batch["inputs"].items()}
    labels = batch["labels"].to(device)
    model_gib = _gib(device, peak=False)
    _fresh(device)
    t0 = time.perf_counter()
    loss = model(**inputs, labels=labels, use_cache=False).loss
    forward = _seconds_since(t0, device)
    t0 = time.perf_counter()
    loss.backward()
    backward = _seconds_since(t0, device)
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    out = {
        "params_b": round(sum(p.numel() for p in params) / 1e9, 4), "params": sum(p.numel() for p in params),
        "params_closed_form": qwen3vl_param_count(arch), "dtype": dtype, **batch["figures"],
        "model_gib": model_gib, "peak_gib": _gib(device), "forward_s": forward, "backward_s": backward,
        "loss": loss.item(), "params_without_grad": len(params) - len(grads),
        "grads_finite": all(bool(torch.isfinite(g).all()) for g in grads),
    }  # fmt: skip
    out["ok"] = out["grads_finite"] and math.isfinite(out["loss"]) and out["params"] == out["params_closed_form"]
    return out


def full_size_teacher_gather(
    device: str, arch: dict = QWEN3VL_8B, dtype: str = "bfloat16", rows: int = 2, topk: int = 100, **row
) -> dict:
    """The SDPO teacher pass's gather on a random Qwen3-VL-8B (no grad, eval): one micro-batch of `rows` step rows
    (one forward, no padding), its logits laid out as verl's packed [1, nnz, V], and the teacher's log-probs at `topk`
    ids of each response token, as `verl_cua.integrations.verl.sdpo.logit.logits_processor`'s teacher_gather takes
    them."""
    import torch

    from verl_cua.algos.sdpo import topk_log_probs
    from verl_cua.integrations.verl.sdpo.logit import response_positions

    _fresh(device)
    model = build_qwen3vl(arch, device, dtype).eval()
    batch = step_rows(arch, rows=rows, **row)
    inputs = {k: t.to(device) for k, t in batch["inputs"].items()}
    response = batch["figures"]["response_tokens"]
    nested = {  # the micro-batch's layout in verl (no padding): each row's tokens, and its response's
        "input_ids": torch.nested.as_nested_tensor(list(inputs["input_ids"]), layout=torch.jagged),
        "responses": torch.nested.as_nested_tensor([r[-response:] for r in inputs["input_ids"]], layout=torch.jagged),
    }
    _fresh(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        logits = model(**inputs, use_cache=False).logits
        logits = logits.reshape(1, -1, logits.shape[-1])  # [1, nnz, V]: the rows packed, as the processor sees them
        forward = _seconds_since(t0, device)
        picked = logits.squeeze(0).index_select(0, response_positions(nested).to(logits.device))
        ids = picked.topk(topk, dim=-1).indices  # the student_topk pass's ids (here from the same weights)
        teacher, _ = topk_log_probs(picked.float(), ids=ids)
    out = {
        "rows": rows, "tokens": int(logits.shape[1]), "image_tokens": rows * batch["figures"]["image_tokens"],
        "gathered": list(teacher.shape), "dtype": dtype, "peak_gib": _gib(device), "forward_s": forward,
        "gather_s": round(_seconds_since(t0, device) - forward, 3),
        "logp_finite": bool(torch.isfinite(teacher).all()), "logp_max": teacher.max().item(),
        "topk_mass_mean": teacher.exp().sum(-1).mean().item(),
    }  # fmt: skip
    out["ok"] = out["logp_finite"] and out["logp_max"] <= 0 and 0 < out["topk_mass_mean"] <= 1 + 1e-3
    return out


def fsdp2_state_per_rank(
    params: int, ranks: int = 8, unit_params: int = 0, root_params: int = 0, master_bytes: int = 4,
    compute_bytes: int = 2, reduce_bytes: int = 4, gathered_units: int = 2,
) -> dict:  # fmt: skip
    """FSDP2's model state on each of `ranks` GPUs, by arithmetic (GiB; activations and logits not included).

    Assumes verl's FSDP2 actor as configured by default (verl/trainer/config/engine/fsdp.yaml: model_dtype fp32,
    mixed_precision param_dtype bf16, reduce_dtype fp32; AdamW):
      sharded = params * (master_bytes + master_bytes + 8) / ranks
        (fp32 params, their fp32 grads, AdamW's two fp32 moments: 16 B a parameter, split over the ranks);
      working = unit_params * (gathered_units * compute_bytes + compute_bytes + reduce_bytes)
                + root_params * compute_bytes
        (the largest FSDP unit all-gathered in bf16, the one computing and the one prefetched, its unsharded bf16
        grads and their fp32 copy for the reduce-scatter; the root module's own params, kept gathered after the
        forward); the same on every rank, whatever `ranks`;
      total = sharded + working.
    """
    gib = 2**30
    shard = params / ranks
    out = {
        "ranks": ranks, "params_gib": shard * master_bytes / gib, "grads_gib": shard * master_bytes / gib,
        "adam_gib": shard * 8 / gib,
        "working_gib": (unit_params * (gathered_units * compute_bytes + compute_bytes + reduce_bytes)
                        + root_params * compute_bytes) / gib,
    }  # fmt: skip
    out["sharded_gib"] = out["params_gib"] + out["grads_gib"] + out["adam_gib"]
    out["total_gib"] = out["sharded_gib"] + out["working_gib"]
    return out


def fsdp2_units(model: Any) -> dict:
    """The parameter counts of the modules verl's FSDP2 wraps (`fsdp_utils._select_fsdp2_wrap_targets`: the model's
    `_no_split_modules` layers, embeddings, an untied lm_head) and of the root's own remainder."""
    import torch

    tied = getattr(model.config, "tie_word_embeddings", False)
    layers = set(getattr(model, "_no_split_modules", None) or ())
    units = [
        sum(p.numel() for p in m.parameters())
        for name, m in model.named_modules()
        if type(m).__name__ in layers
        or (isinstance(m, torch.nn.Embedding) and not tied)
        or (not tied and name.rsplit(".", 1)[-1] == "lm_head")
    ]
    total = sum(p.numel() for p in model.parameters())
    return {"units": len(units), "largest_unit": max(units), "root": total - sum(units)}


def fsdp2_state(arch: dict = QWEN3VL_8B, ranks: tuple[int, ...] = (8, 16)) -> dict:
    """`arch`'s FSDP2 state per rank for each of `ranks` by `fsdp2_state_per_rank` (computed, not measured), its
    parameter and unit counts from the model built on the meta device (no memory)."""
    model = build_qwen3vl(arch, "meta")
    params = sum(p.numel() for p in model.parameters())
    units = fsdp2_units(model)
    per_rank = {}
    for n in ranks:
        state = fsdp2_state_per_rank(params, n, units["largest_unit"], units["root"])
        per_rank[str(n)] = {k: round(v, 2) for k, v in state.items() if k != "ranks"}
    out = {"computed_not_measured": True, "params": params, **units, "per_rank_gib": per_rank}
    out["ok"] = params == qwen3vl_param_count(arch) and all(r["total_gib"] > 0 for r in per_rank.values())
    return out
