"""GPU smoke test of the torch-side pieces (no verl, no Ray): `python -m bench.gpu_smoke [--device cuda]`.

Each check runs on its own and prints one JSON line (ok, figures, or the error), so one failure shows the rest:
- `sdpo_logit`: the top-k log-probs and the logit-level SDPO loss on a Qwen-sized vocabulary (151,936) in bf16
  logits, against the same computation in float64 on the CPU, and its backward;
- `tiny_<family>`: a tiny random Qwen2.5-VL / Qwen3-VL built here, one forward with a screenshot-sized image
  in bf16 on the device against float32 on the CPU (max |logit difference|), and a backward;
- `lora_compact_<family>`: a screenshot stored as PNG (`cua.env.image_storage=png`) expands to the processor's
  patches bit for bit and gives the same bf16 logits on the device, also from patches kept in bf16 (the screenshot
  cache's dtype on the GPU); peft LoRA on all linear layers with the vision
  tower excluded (`exclude_modules='.*visual.*'`) has no tower adapter, equal logits at init, adapter-only grads;
- `ema_checkpoint`: the SDPO EMA teacher of a tiny Qwen3-VL trained a step on the device, saved and loaded as a resume
  does (our atomic shard file), gives the same digest and the same bf16 teacher logits when swapped in; and the
  write rate of a 2 GiB shard (fsync included) on that machine's disk, for the save time at the flagship's size;
- `ema_offload`: the EMA teacher's reads (`verl_cua.algos.ema`) right after an offload the way verl makes it
  (`module.to("cpu", non_blocking=True)` behind queued device work, `PARAM_OFFLOAD=true`): the copy, the average and
  the swap see the offloaded values exactly; how often a read without the wait saw stale host memory is reported;
- `full_size_step` (`bench.gpu_full_size`): a random Qwen3-VL-8B (`QWEN3VL_8B`, no weights, no hub) built on the
  device in bf16 (sdpa, gradient checkpointing) through one flagship step row (`FLAGSHIP_ROW`: ~6k tokens, 3
  screenshots of 1920x1080 at MAX_PIXELS): forward with labels, backward; peak memory, seconds, finite grads, and the
  parameter count against `qwen3vl_param_count`'s closed form;
- `full_size_teacher_gather`: the same model without grad, one micro-batch of 2 such rows (logits laid out as verl's
  packed micro-batch) and the SDPO teacher pass's gather of log-probs at the top-100 ids of each response token;
  peak memory, seconds;
- `fsdp2_state`: FSDP2's per-rank model state of Qwen3-VL-8B on 8 and 16 ranks by arithmetic
  (`fsdp2_state_per_rank`, the units verl wraps counted on the meta device): computed, not measured.

`--smoke` runs every check's code at a tiny size (a 4,096-token vocabulary, small screenshots and layers, a 16 MiB
shard, the suite's cached tiny models, `SMOKE_ARCH` in float32 for the full-size checks; `fsdp2_state` at its full
size, arithmetic): CI's check, with `--device cpu`, that the bench still runs; not its figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
import traceback
from pathlib import Path

from bench.gpu_full_size import (
    SMOKE_ARCH,
    fsdp2_state,
    full_size_step,
    full_size_teacher_gather,
)
from bench.requires import require

# each check's sizes for `--smoke` (CI, on the CPU); without it, each check's defaults (the figures in docs/gpu.md)
SMOKE = {
    "sdpo_logit": {"shape": (2, 16, 4096)},
    "tiny": {"image": (320, 180), "cached": True},
    "lora_compact": {"image": (320, 192), "cached": True},
    "ema_checkpoint": {"shard_floats": 2**22, "cached": True},
    "ema_offload": {"layers": 2, "width": 256, "busy_matmuls": 5},
    "full_size_step": {"arch": SMOKE_ARCH, "dtype": "float32", "screen": (320, 180), "row_tokens": 400, "response": 64},
    "full_size_teacher_gather": {
        "arch": SMOKE_ARCH,
        "dtype": "float32",
        "screen": (320, 180),
        "row_tokens": 400,
        "response": 64,
    },
    "fsdp2_state": {},  # arithmetic on a meta-device model: the full size costs nothing, also in CI
}


def _tiny_model(family: str, cached: bool) -> str:
    """A tiny random `family` model: built afresh in a temporary folder, or the suite's cached one."""
    from verl_cua.testing.tiny_models import build_tiny_model

    return str(build_tiny_model(family) if cached else build_tiny_model(family, f"{tempfile.mkdtemp()}/{family}"))


def sdpo_logit(device: str, shape: tuple[int, int, int] = (4, 512, 151936)) -> dict:
    """Top-100 SDPO loss on [4, 512, 151936] (`shape`) bf16 logits: device vs float64 CPU, and its gradient."""
    import torch

    from verl_cua.algos.sdpo import sdpo_logit_loss, topk_log_probs

    g = torch.Generator().manual_seed(0)
    student = (torch.randn(*shape, generator=g) * 3).to(torch.bfloat16)
    teacher = (student.float() + torch.randn(student.shape, generator=g)).to(torch.bfloat16)
    ref_s, ids = topk_log_probs(student.double(), k=100)
    ref_t, _ = topk_log_probs(teacher.double(), ids=ids)
    reference = sdpo_logit_loss(ref_s, ref_t, alpha=0.5).mean().item()
    s = student.to(device).requires_grad_(True)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    ds, dids = topk_log_probs(s, k=100)
    dt, _ = topk_log_probs(teacher.to(device), ids=dids)
    loss = sdpo_logit_loss(ds, dt, alpha=0.5).mean()
    loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()
    out = {
        "loss": loss.item(), "reference_fp64_cpu": reference, "abs_err": abs(loss.item() - reference),
        # bf16 logits tie often: compare the chosen logit values (tie-blind), not the ids' order
        "same_topk_values_frac": (
            student.gather(-1, dids.cpu()).sort(-1).values == student.gather(-1, ids).sort(-1).values
        ).all(-1).float().mean().item(),
        "grad_finite": bool(torch.isfinite(s.grad).all().item()), "seconds": round(time.perf_counter() - t0, 3),
    }  # fmt: skip
    if device == "cuda":
        out["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    out["ok"] = out["abs_err"] < 1e-2 and out["grad_finite"]
    return out


def tiny(family: str, device: str, image: tuple[int, int] = (1280, 720), cached: bool = False) -> dict:
    """A tiny random model of `family`: bf16 forward on `device` vs float32 on the CPU, then a backward."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = _tiny_model(family, cached)
    processor = AutoProcessor.from_pretrained(path)
    image = Image.new("RGB", image, (40, 90, 200))
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the button."}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    cpu = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = cpu(**inputs).logits.float()
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.bfloat16).to(device)
    moved = {k: v.to(device) if hasattr(v, "to") else v for k, v in inputs.items()}
    t0 = time.perf_counter()
    logits = model(**moved).logits
    logits.float().logsumexp(-1).mean().backward()
    if device == "cuda":
        torch.cuda.synchronize()
    diff = (logits.detach().float().cpu() - ref).abs().max().item()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return {
        "tokens": int(inputs["input_ids"].shape[1]), "max_abs_logit_diff_bf16": diff,
        "ref_logit_scale": ref.abs().max().item(), "params_with_grad": len(grads),
        "grads_finite": all(bool(torch.isfinite(g).all()) for g in grads),
        "seconds": round(time.perf_counter() - t0, 3), "ok": diff < 0.1 * max(1.0, ref.abs().max().item()),
    }  # fmt: skip


def lora_compact(family: str, device: str, image: tuple[int, int] = (1312, 736), cached: bool = False) -> dict:
    """Compact screenshots and LoRA on `device`: PNG-stored screenshots expand to the processor's patches bit for bit
    and give the same bf16 logits; LoRA with the vision tower excluded adds no tower adapter, leaves the logits
    unchanged at init (B = 0) and trains only adapter weights."""
    import torch
    from peft import LoraConfig, get_peft_model
    from PIL import Image, ImageDraw
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from verl_cua.integrations.verl.screenshots.compact import compact, expand, image_grid

    path = _tiny_model(family, cached)
    processor = AutoProcessor.from_pretrained(path)
    image = Image.new("RGB", image, (230, 230, 230))
    ImageDraw.Draw(image).rectangle((100, 100, 400, 160), fill=(20, 90, 200))
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the button."}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    stored = compact({"image_grid_thw": inputs["image_grid_thw"]}, [image])
    expanded = expand(stored, processor.image_processor)
    same_patches = bool(torch.equal(expanded["pixel_values"], inputs["pixel_values"]))
    grid_ok = bool(torch.equal(image_grid(image, processor.image_processor), inputs["image_grid_thw"]))
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.bfloat16, attn_implementation="sdpa")
    model = model.to(device)
    moved = {k: v.to(device) if hasattr(v, "to") else v for k, v in inputs.items()}
    with torch.no_grad():
        base = model(**moved).logits.float()
        from_png = model(**{**moved, "pixel_values": expanded["pixel_values"].to(device)}).logits.float()
        # the screenshot cache keeps patches in the compute dtype: the model casts them to it first, same logits
        bf16_patches = expanded["pixel_values"].to(torch.bfloat16).to(device)
        from_bf16 = model(**{**moved, "pixel_values": bf16_patches}).logits.float()
    config = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", exclude_modules=".*visual.*")
    peft_model = get_peft_model(model, config)
    names = [n for n, _ in peft_model.named_modules() if n.endswith("lora_A")]
    t0 = time.perf_counter()
    logits = peft_model(**moved).logits
    logits.float().logsumexp(-1).mean().backward()
    if device == "cuda":
        torch.cuda.synchronize()
    trained = [n for n, p in peft_model.named_parameters() if p.grad is not None]
    out = {
        "png_bytes": len(stored["cua_images"][0]), "fp32_patch_bytes": inputs["pixel_values"].numel() * 4,
        "same_patches": same_patches, "grid_without_patches_ok": grid_ok,
        "png_logits_equal": bool(torch.equal(base, from_png)),
        "bf16_patches_logits_equal": bool(torch.equal(base, from_bf16)),
        "lora_modules": len(names), "lora_modules_in_vision_tower": sum("visual" in n for n in names),
        "lora_init_logits_equal": bool(torch.equal(base, logits.detach().float())),
        "only_adapters_trained": bool(trained) and all("lora_" in n for n in trained),
        "seconds": round(time.perf_counter() - t0, 3),
    }  # fmt: skip
    out["ok"] = (
        all(
            out[k]
            for k in (
                "same_patches",
                "grid_without_patches_ok",
                "png_logits_equal",
                "bf16_patches_logits_equal",
                "lora_init_logits_equal",
                "only_adapters_trained",
            )
        )
        and out["lora_modules"] > 0
    )
    out["ok"] = out["ok"] and out["lora_modules_in_vision_tower"] == 0
    return out


def ema_checkpoint(device: str, shard_floats: int = 2**29, cached: bool = False) -> dict:
    """The EMA teacher through a checkpoint: same digest, same swapped-in logits; the write rate of a 2 GiB
    (`shard_floats` fp32) shard."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from verl_cua.integrations.verl.resume.checkpoint_io import content_digest, load_tensor_file, save_tensor_file

    path = _tiny_model("qwen3vl", cached)
    processor = AutoProcessor.from_pretrained(path)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the button."}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    inputs = processor(text=[text], images=[Image.new("RGB", (640, 360), (40, 90, 200))], return_tensors="pt")
    moved = {k: v.to(device) if hasattr(v, "to") else v for k, v in inputs.items()}
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.bfloat16).to(device)
    ema = [p.detach().to("cpu", torch.float32, copy=True) for p in model.parameters()]
    model(**moved).logits.float().logsumexp(-1).mean().backward()
    with torch.no_grad():
        for p, shadow in zip(model.parameters(), ema, strict=True):
            if p.grad is not None:
                p.add_(p.grad, alpha=-1e-2)
            shadow.mul_(0.5).add_(p.detach().to("cpu", torch.float32), alpha=0.5)
    folder = tempfile.mkdtemp()
    save_tensor_file(ema, Path(folder) / "rank_0.pt")
    loaded = load_tensor_file(Path(folder) / "rank_0.pt")

    def teacher_logits(weights) -> torch.Tensor:
        with torch.no_grad():
            for p, w in zip(model.parameters(), weights, strict=True):
                p.copy_(w.to(p.device, p.dtype))
            return model(**moved).logits.float().cpu()

    same_logits = bool(torch.equal(teacher_logits(ema), teacher_logits(loaded)))
    big = torch.randn(shard_floats)
    t0 = time.perf_counter()
    size = save_tensor_file(big, Path(folder) / "big.pt")
    seconds = time.perf_counter() - t0
    out = {
        "same_digest": content_digest(ema) == content_digest(loaded), "same_teacher_logits": same_logits,
        "ema_mib": round(sum(t.numel() * 4 for t in ema) / 2**20, 2),
        "shard_write_gib_s": round(size / 2**30 / seconds, 3),
    }  # fmt: skip
    out["ok"] = out["same_digest"] and out["same_teacher_logits"]
    return out


def ema_offload(device: str, layers: int = 8, width: int = 4096, busy_matmuls: int = 200) -> dict:
    """EMA copy/update/swap right after a non-blocking offload behind queued device work: exact, every time."""
    import torch

    from verl_cua.algos.ema import ema_copy, ema_restore, ema_swap_in, ema_update

    torch.manual_seed(0)
    module = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
    module = module.to(device, torch.bfloat16)
    side = 8192 if device == "cuda" else 256
    busy = torch.randn(side, side, device=device, dtype=torch.bfloat16)

    def offload_behind_work(scale: float) -> list[torch.Tensor]:
        """Change the weights on the device, queue work, then offload the way verl does; the true values."""
        with torch.no_grad():
            for p in module.parameters():
                p.mul_(scale)
            truth = [p.detach().float().cpu() for p in module.parameters()]  # synchronous: the reference
            for _ in range(busy_matmuls):  # ~0.3 s of an H200's bf16 matmuls
                busy.copy_(busy @ busy / side)  # keeps the stream busy, so the copy below is still queued
            module.to("cpu", non_blocking=True)
        return truth

    def stale_now(truth) -> bool:
        """A read without the wait: does it see anything but the offloaded values?"""
        return any(not torch.equal(p.detach().float(), t) for p, t in zip(module.parameters(), truth, strict=True))

    races = 0
    truth = offload_behind_work(1.0)
    races += stale_now(truth)
    ema = ema_copy(list(module.parameters()))
    copy_exact = all(torch.equal(e, t) for e, t in zip(ema, truth, strict=True))
    module.to(device)
    before = [e.clone() for e in ema]
    truth = offload_behind_work(0.5)
    races += stale_now(truth)
    ema_update(ema, list(module.parameters()), 0.25)
    expected = [b.mul(0.75).add(t, alpha=0.25) for b, t in zip(before, truth, strict=True)]
    update_exact = all(torch.equal(e, x) for e, x in zip(ema, expected, strict=True))
    module.to(device)
    truth = offload_behind_work(2.0)
    races += stale_now(truth)
    backup = ema_swap_in(ema, list(module.parameters()))
    backup_exact = all(torch.equal(b.float(), t) for b, t in zip(backup, truth, strict=True))
    ema_restore(list(module.parameters()), backup)
    restored = all(torch.equal(p.detach().float(), t) for p, t in zip(module.parameters(), truth, strict=True))
    out = {
        "params_mib": round(sum(p.numel() * 2 for p in module.parameters()) / 2**20, 1),
        "copy_exact": copy_exact, "update_exact": update_exact, "swap_backup_exact": backup_exact,
        "restored_exact": restored, "reads_without_wait_that_saw_stale_memory": f"{races}/3",
    }  # fmt: skip
    out["ok"] = copy_exact and update_exact and backup_exact and restored
    return out


def main(argv: list[str] | None = None) -> None:
    """Run every check; one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="every check at a tiny size (CI, with --device cpu)")
    args = parser.parse_args(argv)
    require("bench.gpu_smoke", ("torch", "peft"))
    sizes = SMOKE if args.smoke else dict.fromkeys(SMOKE, {})
    import torch
    import transformers

    env = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
    if args.device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "NO CUDA"
    print(json.dumps({"check": "env", "smoke": args.smoke, **env}), flush=True)
    checks = {"sdpo_logit": lambda: sdpo_logit(args.device, **sizes["sdpo_logit"])}
    for family in ("qwen25vl", "qwen3vl"):
        checks[f"tiny_{family}"] = lambda family=family: tiny(family, args.device, **sizes["tiny"])
        checks[f"lora_compact_{family}"] = lambda family=family: lora_compact(
            family, args.device, **sizes["lora_compact"]
        )
    checks["ema_checkpoint"] = lambda: ema_checkpoint(args.device, **sizes["ema_checkpoint"])
    checks["ema_offload"] = lambda: ema_offload(args.device, **sizes["ema_offload"])
    for name, check in (("full_size_step", full_size_step), ("full_size_teacher_gather", full_size_teacher_gather)):
        checks[name] = lambda name=name, check=check: check(args.device, **sizes[name])
    checks["fsdp2_state"] = lambda: fsdp2_state(**sizes["fsdp2_state"])
    for name, check in checks.items():
        try:
            result = check()
        except Exception as exc:  # each check reports, the others still run
            error = f"{type(exc).__name__}: {exc}"[:500]
            result = {"ok": False, "error": error, "where": traceback.format_exc()[-800:]}
        print(json.dumps({"check": name, **result}), flush=True)


if __name__ == "__main__":
    main()
