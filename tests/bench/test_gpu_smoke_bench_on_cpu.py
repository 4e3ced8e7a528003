"""`python -m bench.gpu_smoke --device cpu --smoke`: the GPU bench's CPU path. Every check's code runs at a tiny size on
the CPU (no GPU here): the SDPO top-k loss against float64, the tiny models' bf16 forward and backward, PNG screenshots
and LoRA, the EMA teacher through a checkpoint and an offload, a shrunk Qwen3-VL through a step row and the SDPO
teacher's gather; each reports ok with its figures, none an error. In this process (its imports are the suite's);
`python -m bench.gpu_smoke` itself runs in test_requires_on_cpu.py. The closed-form parameter count is checked at the
full Qwen3-VL-8B size on the meta device (no memory), and FSDP2's per-rank arithmetic against a hand computation."""

import copy
import json
import math

import pytest

from bench import gpu_full_size, gpu_smoke

CHECKS = ["env", "sdpo_logit", "tiny_qwen25vl", "lora_compact_qwen25vl", "tiny_qwen3vl", "lora_compact_qwen3vl",
          "ema_checkpoint", "ema_offload", "full_size_step", "full_size_teacher_gather", "fsdp2_state"]  # fmt: skip


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
    _check_full_size_lines(lines)


def _check_full_size_lines(lines: dict) -> None:
    """The shrunk step row and teacher gather: finite grads everywhere, the token counts their grids imply."""
    step, gather, fsdp = lines["full_size_step"], lines["full_size_teacher_gather"], lines["fsdp2_state"]
    size, vision = gpu_smoke.SMOKE["full_size_step"], gpu_full_size.SMOKE_ARCH["vision_config"]
    factor = vision["patch_size"] * vision["spatial_merge_size"]
    width, height = step["image"]
    assert width % factor == 0 and height % factor == 0 and width * height <= gpu_full_size.FLAGSHIP_ROW["max_pixels"]
    per_image = (width // vision["patch_size"]) * (height // vision["patch_size"]) // vision["spatial_merge_size"] ** 2
    assert step["image_tokens"] == gpu_full_size.FLAGSHIP_ROW["screenshots"] * per_image
    assert step["tokens"] == size["row_tokens"] and step["response_tokens"] == size["response"]
    assert step["image_tokens"] + step["response_tokens"] < step["tokens"]
    assert step["grads_finite"] and step["params_without_grad"] == 0 and math.isfinite(step["loss"])
    assert step["params"] == step["params_closed_form"] and step["peak_gib"] is None  # on the CPU: no peak
    assert gather["tokens"] == gather["rows"] * step["tokens"]
    assert gather["image_tokens"] == gather["rows"] * step["image_tokens"]
    assert gather["gathered"] == [gather["rows"] * step["response_tokens"], 100]
    assert gather["logp_finite"] and gather["logp_max"] <= 0
    assert fsdp["computed_not_measured"]
    assert fsdp["params"] == gpu_full_size.qwen3vl_param_count(gpu_full_size.QWEN3VL_8B)


def _meta_count(arch: dict) -> int:
    return sum(p.numel() for p in gpu_full_size.build_qwen3vl(arch, "meta").parameters())


def test_closed_form_parameter_count_is_the_full_size_models_on_the_meta_device():
    count = gpu_full_size.qwen3vl_param_count(gpu_full_size.QWEN3VL_8B)
    assert count == _meta_count(gpu_full_size.QWEN3VL_8B)
    assert 8.5e9 < count < 9.0e9  # the published 8.8B


def test_closed_form_follows_tied_embeddings_biases_and_deepstack_layers():
    arch = copy.deepcopy(gpu_full_size.SMOKE_ARCH)
    arch["tie_word_embeddings"] = True
    arch["text_config"]["attention_bias"] = True
    arch["vision_config"]["deepstack_visual_indexes"] = [0, 1]
    assert gpu_full_size.qwen3vl_param_count(arch) == _meta_count(arch)
    assert gpu_full_size.qwen3vl_param_count(arch) != gpu_full_size.qwen3vl_param_count(gpu_full_size.SMOKE_ARCH)


def test_fsdp2_units_are_verls_wrap_targets_at_the_full_size():
    arch = gpu_full_size.QWEN3VL_8B
    units = gpu_full_size.fsdp2_units(gpu_full_size.build_qwen3vl(arch, "meta"))
    text = arch["text_config"]
    # one unit per decoder layer and vision block, plus embed_tokens, the vision position table and the lm_head
    assert units["units"] == text["num_hidden_layers"] + arch["vision_config"]["depth"] + 3
    assert units["largest_unit"] == text["vocab_size"] * text["hidden_size"]
    assert 0 < units["root"] < units["largest_unit"]


def test_fsdp2_state_per_rank_is_the_hand_computed_arithmetic():
    params, ranks, unit, root = 1_000_000, 4, 10_000, 5_000
    state = gpu_full_size.fsdp2_state_per_rank(params, ranks, unit_params=unit, root_params=root)
    gib = 1024**3
    fp32_weights, fp32_grads, adam_moments = 4 * params / ranks, 4 * params / ranks, 2 * 4 * params / ranks
    gathered_bf16, unsharded_grads, fp32_reduce_copy, root_bf16 = 2 * (2 * unit), 2 * unit, 4 * unit, 2 * root
    assert state["params_gib"] == pytest.approx(fp32_weights / gib)
    assert state["adam_gib"] == pytest.approx(adam_moments / gib)
    assert state["sharded_gib"] == pytest.approx((fp32_weights + fp32_grads + adam_moments) / gib)
    assert state["working_gib"] == pytest.approx((gathered_bf16 + unsharded_grads + fp32_reduce_copy + root_bf16) / gib)
    assert state["total_gib"] == pytest.approx(state["sharded_gib"] + state["working_gib"])


def test_fsdp2_state_per_rank_roughly_halves_when_the_ranks_double():
    params, unit, root = 8_000_000_000, 100_000_000, 50_000_000
    eight, sixteen = (gpu_full_size.fsdp2_state_per_rank(params, n, unit, root) for n in (8, 16))
    assert sixteen["sharded_gib"] == pytest.approx(eight["sharded_gib"] / 2)
    assert sixteen["working_gib"] == pytest.approx(eight["working_gib"])  # the gathered unit does not shrink
    assert 0.5 < sixteen["total_gib"] / eight["total_gib"] < 0.55


def test_the_flagship_step_row_holds_its_screenshots_where_the_model_looks_for_them():
    arch, row = gpu_full_size.QWEN3VL_8B, gpu_full_size.FLAGSHIP_ROW
    batch = gpu_full_size.step_rows(arch)
    ids, inputs = batch["inputs"]["input_ids"][0], batch["inputs"]
    grid = inputs["image_grid_thw"]
    merge = arch["vision_config"]["spatial_merge_size"]
    pads = int(grid[0].prod()) // merge**2
    starts = (ids == arch["vision_start_token_id"]).nonzero().flatten().tolist()
    assert len(starts) == len(grid) == row["screenshots"] and inputs["pixel_values"].shape[0] == int(
        grid.prod(-1).sum()
    )
    for start in starts:  # vision start, the screenshot's image pads, vision end
        assert (ids[start + 1 : start + 1 + pads] == arch["image_token_id"]).all()
        assert ids[start + 1 + pads] == arch["vision_end_token_id"]
    assert int(inputs["mm_token_type_ids"].sum()) == batch["figures"]["image_tokens"] == row["screenshots"] * pads
    assert len(ids) == row["row_tokens"] and (batch["labels"][0] != -100).sum() == row["response"]
    width, height = batch["figures"]["image"]
    assert width * height <= row["max_pixels"] and abs(width / height - row["screen"][0] / row["screen"][1]) < 0.05
