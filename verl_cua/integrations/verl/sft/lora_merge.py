"""LoRA SFT checkpoints as plain Hugging Face folders: verl 0.9.1 saves `global_step_N/huggingface` of a LoRA run with
peft's names (`base_model.model.`, `.base_layer`, `lora_A`/`lora_B`), which neither transformers nor the RL trainer
loads as the model; merging W + (alpha / r) B A gives the folder RL starts from."""

from __future__ import annotations

import json
from pathlib import Path

PREFIX = "base_model.model."


def merge_lora_state(state: dict, alpha: float, rank: int) -> dict:
    """peft-named tensors -> plain names with every LoRA pair merged into its base layer."""
    scale = alpha / rank
    merged = {}
    for key, value in state.items():
        if ".lora_A." in key or ".lora_B." in key:
            continue
        name = key.removeprefix(PREFIX).replace(".base_layer.", ".")
        if key.endswith(".base_layer.weight"):
            stem = key[: -len(".base_layer.weight")]
            a, b = state.get(f"{stem}.lora_A.default.weight"), state.get(f"{stem}.lora_B.default.weight")
            if a is not None and b is not None:
                value = (value.float() + scale * (b.float() @ a.float())).to(value.dtype)
        merged[name] = value
    return merged


def merge_lora_checkpoints(ckpt_dir: str) -> int:
    """Merge the LoRA pairs of every `global_step_*/huggingface` under `ckpt_dir` in place; returns folders merged."""
    from safetensors.torch import load_file, save_file

    done = 0
    for folder in Path(ckpt_dir).glob("global_step_*/huggingface"):
        meta_path = folder.parent / "lora_train_meta.json"
        files = sorted(folder.glob("*.safetensors"))
        if not meta_path.is_file() or not files:
            continue
        meta = json.loads(meta_path.read_text())
        state = {}
        for f in files:
            state.update(load_file(f))
        if not any(".lora_A." in k for k in state):
            continue
        merged = merge_lora_state(state, float(meta["lora_alpha"]), int(meta["r"]))
        for f in files:
            f.unlink()
        (folder / "model.safetensors.index.json").unlink(missing_ok=True)
        tensors = {k: v.contiguous() for k, v in merged.items()}
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
        done += 1
    return done
