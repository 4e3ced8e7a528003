"""What a run holds beyond its desktops and rows: the model's parameter count (from its config.json, else its name),
the SDPO teacher's host copy (ema, frozen), the worker and rollout processes of each GPU, and the disk its kept
checkpoints take. Estimates from the config's sizes, not measurements; only the disk's write rate, behind the
checkpoint's save time, is measured (`disk_write_rate`)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.doctor.finding import Finding
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import plan_for

FP32 = 4  # bytes: verl's FSDP actor keeps fp32 weights (model_dtype fp32), the EMA teacher is fp32
ADAM = 8  # bytes: Adam's two fp32 moments
BF16 = 2
PROCESS_GB_PER_GPU = 8.0  # host memory of a GPU's Ray worker (actor/ref) and its rollout server process: ~6-10 GB
# the teachers with a host copy (`cua.sdpo.teacher`): how the memory and the checkpoint findings name the copy
TEACHER_COPIES = {"ema": ("EMA teacher", "EMA fp32"), "frozen": ("frozen teacher", "frozen teacher fp32")}
WRITE_PROBE_MIB = 64  # written and fsync'd once where the checkpoints go, for the save time
NAME_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[Bb](?![a-zA-Z])")  # "Qwen3-VL-8B-Instruct" -> 8


@dataclass(frozen=True)
class Params:
    """A model's parameter count and where it was read."""

    count: int
    source: str

    def describe(self) -> str:
        """`8.8B params from config.json`."""
        return f"{self.count / 1e9:.1f}B params from {self.source}"


def model_params(model_path: str) -> Params | None:
    """The parameter count of `model_path`: from its config.json (a local folder or the HF cache), else from a size
    in its name ("8B"); None when neither says."""
    config = _model_config(model_path)
    if config:
        count = config_params(config)
        if count:
            return Params(count, "config.json")
    match = NAME_SIZE.search(Path(model_path).name)
    return Params(int(float(match.group(1)) * 1e9), "the name") if match else None


def _model_config(model_path: str) -> dict[str, Any] | None:
    path = Path(model_path).expanduser() / "config.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model_path, "config.json")
        except Exception:  # not a repo id, or no huggingface_hub
            return None
        if not isinstance(cached, str):
            return None
        path = Path(cached)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def config_params(config: dict[str, Any]) -> int:
    """Parameters of a decoder (dense or MoE) plus a Qwen-VL vision tower, from a Hugging Face config; 0 if unknown."""
    text = config.get("text_config") or config
    if not text.get("hidden_size") or not text.get("num_hidden_layers"):
        return 0
    tied = text.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
    count = _decoder_params(text, bool(tied))
    vision = config.get("vision_config")
    if vision:
        count += _vision_params(vision, str(config.get("model_type", "")), int(text["hidden_size"]))
    return count


def _decoder_params(t: dict[str, Any], tied: bool) -> int:
    h, layers, vocab = int(t["hidden_size"]), int(t["num_hidden_layers"]), int(t.get("vocab_size", 0))
    heads = int(t.get("num_attention_heads", 1))
    kv = int(t.get("num_key_value_heads") or heads)
    head_dim = int(t.get("head_dim") or h // heads)
    attention = 2 * h * heads * head_dim + 2 * h * kv * head_dim
    experts = int(t.get("num_experts") or t.get("num_local_experts") or t.get("n_routed_experts") or 0)
    if experts:
        mlp = experts * 3 * h * int(t["moe_intermediate_size"]) + h * experts
        mlp += 3 * h * int(t.get("shared_expert_intermediate_size") or 0)
    else:
        mlp = 3 * h * int(t["intermediate_size"])
    return layers * (attention + mlp + 2 * h) + vocab * h * (1 if tied else 2) + h


def _vision_params(v: dict[str, Any], model_type: str, out: int) -> int:
    hidden = int(v.get("hidden_size") if "embed_dim" not in v else v["embed_dim"])
    inner = int(v.get("intermediate_size") or hidden * v.get("mlp_ratio", 4))
    mlp = (3 if model_type == "qwen2_5_vl" else 2) * hidden * inner  # Qwen2.5-VL's vision MLP is gated
    blocks = int(v.get("depth", 0)) * (4 * hidden * hidden + mlp + 4 * hidden)
    patch = int(v.get("in_channels", 3)) * int(v.get("temporal_patch_size", 2)) * int(v.get("patch_size", 14)) ** 2
    merged = hidden * int(v.get("spatial_merge_size", 2)) ** 2
    mergers = 1 + len(v.get("deepstack_visual_indexes") or [])
    merger = merged * merged + merged * int(v.get("out_hidden_size") or out)
    return blocks + patch * hidden + mergers * merger + int(v.get("num_position_embeddings", 0)) * hidden


def _get(config: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        config = (config or {}).get(key) if isinstance(config, dict) else None
    return config


def host_teacher(config: dict[str, Any]) -> str | None:
    """The SDPO teacher whose fp32 copy of the weights the run keeps on the host and in its checkpoints ("ema" or
    "frozen", the estimator plan's `host_teacher`), None when it keeps none."""
    cua = CuaConfig.of(config.get("cua") or {})
    plan = plan_for(_get(config, "algorithm", "adv_estimator"), cua)
    return cua.sdpo.teacher if plan.host_teacher else None


def host_terms(config: dict[str, Any], params: Params | None) -> list[tuple[float, str]]:
    """This node's host memory beyond desktops and rows, in GB, each with what it is."""
    trainer = config.get("trainer") or {}
    if trainer.get("device", "cuda") == "cpu":
        gpus = 0
    else:
        gpus = int(trainer.get("n_gpus_per_node") or 0)
    nodes = max(int(trainer.get("nnodes") or 1), 1)
    out = []
    if params:
        share = params.count / nodes / 1e9  # each node's ranks hold their shards of the model
        teacher = host_teacher(config)
        if teacher:
            out.append((share * FP32, f"{TEACHER_COPIES[teacher][0]} ({params.describe()} x 4 B fp32)"))
            out.append((share * FP32, "its swap backup during the teacher pass"))
        fsdp = _get(config, "actor_rollout_ref", "actor", "fsdp_config") or {}
        if fsdp.get("param_offload"):
            out.append((share * FP32, "offloaded fp32 weights"))
        if fsdp.get("optimizer_offload"):
            out.append((share * ADAM, "offloaded Adam moments"))
    if gpus:
        per_gpu = f"{gpus} GPUs x {PROCESS_GB_PER_GPU:g} GB"
        out.append((gpus * PROCESS_GB_PER_GPU, f"worker and rollout processes ({per_gpu})"))
        cache = screenshot_cache_gb()
        if cache:
            out.append((gpus * cache, f"screenshot caches ({gpus} GPUs x {cache:g} GB, VERL_CUA_IMAGE_CACHE_GIB)"))
    return out


def screenshot_cache_gb() -> float:
    """The engine's screenshot cache per GPU rank, in GB (0 when turned off or set to nonsense: the run says so)."""
    from verl_cua.integrations.verl.screenshots.cache import budget_bytes

    try:
        return round(budget_bytes() / 1e9, 1)
    except ValueError:
        return 0.0


def checkpoint_bytes_per_param(config: dict[str, Any]) -> tuple[int, str]:
    """Bytes a checkpoint takes per model parameter, and of what."""
    actor = _get(config, "actor_rollout_ref", "actor") or {}
    lora = int(_get(config, "actor_rollout_ref", "model", "lora_rank") or 0) > 0
    parts = [(FP32, "fp32 weights")]
    if not lora:
        parts.append((ADAM, "Adam"))
    if "hf_model" in ((actor.get("checkpoint") or {}).get("save_contents") or []):
        parts.append((BF16, "a bf16 HF copy"))
    teacher = host_teacher(config)
    if teacher:
        parts.append((FP32, TEACHER_COPIES[teacher][1]))
    return sum(b for b, _ in parts), " + ".join(what for _, what in parts)


def checkpoint_finding(config: dict[str, Any], params: Params | None) -> Finding | None:
    """The disk the run's kept checkpoints take at trainer.default_local_dir against the free space there."""
    trainer = config.get("trainer") or {}
    if int(trainer.get("save_freq") or -1) <= 0:
        return None
    if params is None:
        return Finding("info", "checkpoint disk", "the model's size is unknown here (no config.json): not estimated")
    per_param, parts = checkpoint_bytes_per_param(config)
    each = params.count * per_param / 1e9
    existing = checkpoint_root(config)
    free = shutil.disk_usage(existing).free / 1e9
    what = f"~{each:.0f} GB a save ({params.describe()} x {per_param} B: {parts})"
    keep = trainer.get("max_actor_ckpt_to_keep")
    if not keep:
        fits = math.floor(free / each) if each else 0
        return Finding("warn", "checkpoint disk", f"{what}, every save kept (max_actor_ckpt_to_keep=null): {free:.0f} "
                                                 f"GB free at {existing} holds {fits}; set CKPT_KEEP=2")  # fmt: skip
    need = int(keep) * each
    level = "FAIL" if need > free else "warn" if need > 0.8 * free else "ok"
    fix = "" if level == "ok" else "; free disk, lower CKPT_KEEP, or point trainer.default_local_dir elsewhere"
    return Finding(level, "checkpoint disk", f"{what} x {keep} kept = {need:.0f} GB of {free:.0f} GB free at "
                                             f"{existing}{fix}")  # fmt: skip


def checkpoint_root(config: dict[str, Any]) -> Path:
    """The existing folder at or above trainer.default_local_dir (where the checkpoints will go)."""
    root = Path(str((config.get("trainer") or {}).get("default_local_dir") or "checkpoints")).expanduser()
    return next((p for p in [root, *root.parents] if p.exists()), Path(".")).resolve()


def disk_write_rate(folder: Path, mib: int = WRITE_PROBE_MIB) -> float | None:
    """Bytes a second `folder`'s disk takes for `mib` MiB written and fsync'd (the file removed); None if it cannot."""
    block = os.urandom(1 << 20)  # incompressible, as weights are
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".verl_cua_write_probe_") as f:
            start = time.perf_counter()
            for _ in range(mib):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())
            elapsed = time.perf_counter() - start
    except OSError:
        return None
    return mib * (1 << 20) / max(elapsed, 1e-6)


def checkpoint_time_finding(config: dict[str, Any], params: Params | None) -> Finding | None:
    """When the first checkpoint comes, its size, and its save time at this disk's measured write rate."""
    trainer = config.get("trainer") or {}
    save_freq = int(trainer.get("save_freq") or -1)
    if save_freq <= 0 or params is None:
        return None
    per_param, _ = checkpoint_bytes_per_param(config)
    size = params.count * per_param
    root = checkpoint_root(config)
    rate = disk_write_rate(root)
    if rate is None:
        return Finding("warn", "checkpoint", f"~{size / 1e9:.0f} GB a save; {root} takes no write (read-only?)")
    minutes = size / rate / 60
    early = "" if save_freq == 1 else "; a first run of the flagship with SHAKEDOWN=1 saves after step 1 and resumes"
    return Finding("ok", "checkpoint", f"the first save after step {save_freq}: ~{size / 1e9:.0f} GB at "
                                       f"{rate / 1e6:.0f} MB/s (measured at {root}, {WRITE_PROBE_MIB} MiB fsync'd) = "
                                       f"~{minutes:.1f} min{early}")  # fmt: skip
