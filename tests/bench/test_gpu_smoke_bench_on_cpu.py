"""`python -m bench.gpu_smoke --device cpu --smoke`: the GPU bench's CPU path. Every check's code runs at a tiny size on
the CPU (no GPU here): the SDPO top-k loss against float64, the tiny models' bf16 forward and backward, PNG screenshots
and LoRA, the EMA teacher through a checkpoint and an offload; each reports ok with its figures, none an error. In this
process (its imports are the suite's); `python -m bench.gpu_smoke` itself runs in test_requires_on_cpu.py."""

import json
import math

from bench import gpu_smoke

CHECKS = ["env", "sdpo_logit", "tiny_qwen25vl", "lora_compact_qwen25vl", "tiny_qwen3vl", "lora_compact_qwen3vl",
          "ema_checkpoint", "ema_offload"]  # fmt: skip


def test_every_check_runs_on_the_cpu_path_at_the_smoke_size(capsys):
    gpu_smoke.main(["--device", "cpu", "--smoke"])
    lines = {line["check"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert list(lines) == CHECKS and lines["env"]["smoke"] is True
    failed = {name: line for name, line in lines.items() if name != "env" and line.get("ok") is not True}
    assert not failed, failed
    logit = lines["sdpo_logit"]
    assert logit["abs_err"] < 1e-2 and logit["same_topk_values_frac"] > 0.5 and math.isfinite(logit["loss"])
    for family in ("qwen25vl", "qwen3vl"):
        tiny, lora = lines[f"tiny_{family}"], lines[f"lora_compact_{family}"]
        assert tiny["tokens"] > 10 and tiny["params_with_grad"] > 0 and tiny["grads_finite"]
        assert 0 < lora["png_bytes"] < lora["fp32_patch_bytes"] and lora["lora_modules"] > 0
    assert lines["ema_checkpoint"]["shard_write_gib_s"] > 0 and lines["ema_checkpoint"]["ema_mib"] > 0
    assert lines["ema_offload"]["reads_without_wait_that_saw_stale_memory"] == "0/3"  # the CPU copies synchronously
