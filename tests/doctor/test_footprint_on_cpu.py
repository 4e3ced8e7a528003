"""The doctor's host memory and checkpoint disk: the model's parameters read from its config.json (checked against
transformers' own count of the same config, built on the meta device), the EMA teacher and its swap, the worker and
rollout processes per GPU, and the kept checkpoints against the free disk. Model configs are written in tmp_path with
the published sizes of Qwen3-VL-8B and Qwen2.5-VL-7B; nothing is downloaded."""

import json
import re
from collections import namedtuple
from pathlib import Path

import pytest

from verl_cua.doctor import footprint
from verl_cua.doctor.footprint import checkpoint_bytes_per_param, checkpoint_finding, config_params, model_params

ROOT = Path(__file__).resolve().parents[2]
FLAGSHIP = str(ROOT / "recipes" / "run_qwen3vl_sdpo_osworld.sh")
QWEN3_VL_8B = {
    "model_type": "qwen3_vl",
    "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "intermediate_size": 12288,
                    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                    "vocab_size": 151936, "tie_word_embeddings": False, "rope_theta": 5000000,
                    "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"}},
    "vision_config": {"model_type": "qwen3_vl", "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
                      "num_heads": 16, "out_hidden_size": 4096, "patch_size": 16, "spatial_merge_size": 2,
                      "temporal_patch_size": 2, "deepstack_visual_indexes": [8, 16, 24],
                      "num_position_embeddings": 2304, "in_channels": 3},
}  # fmt: skip
QWEN25_VL_7B = {
    "model_type": "qwen2_5_vl", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                      "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                      "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]},
}  # fmt: skip


@pytest.mark.parametrize("config", [QWEN3_VL_8B, QWEN25_VL_7B], ids=["qwen3vl-8b", "qwen25vl-7b"])
def test_the_parameter_count_matches_transformers_own(config):
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(**config))
    real = sum(p.numel() for p in model.parameters())
    assert abs(config_params(config) - real) / real < 0.001, (config_params(config), real)


def test_the_count_comes_from_config_json_else_the_name(tmp_path):
    folder = tmp_path / "Qwen3-VL-8B-Instruct"
    folder.mkdir()
    assert model_params(str(folder)).describe() == "8.0B params from the name"
    (folder / "config.json").write_text(json.dumps(QWEN3_VL_8B))
    assert model_params(str(folder)).describe() == "8.8B params from config.json"
    assert model_params(str(tmp_path / "my-model")) is None


@pytest.fixture
def flagship(tmp_path):
    """The flagship's resolved config on a local Qwen3-VL-8B folder (its config.json only), checkpoints in tmp_path."""
    from verl_cua.doctor.recipe import recipe_findings

    folder = tmp_path / "Qwen3-VL-8B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_VL_8B))
    extra = [f"actor_rollout_ref.model.path={folder}", f"trainer.default_local_dir={tmp_path / 'ckpt'}"]
    _findings, config = recipe_findings(FLAGSHIP, extra)
    return config


def test_the_flagships_host_memory_counts_the_teacher_and_the_workers(flagship, monkeypatch):
    from verl_cua.doctor.system import _desktops

    monkeypatch.delenv("VERL_CUA_IMAGE_CACHE_GIB", raising=False)
    memory = next(f for f in _desktops(flagship) if f.check == "memory")
    detail = memory.detail
    assert detail.startswith("32 docker desktops x 4 GB + ~") and "\n" not in detail
    assert "+ 35 GB EMA teacher (8.8B params from config.json x 4 B fp32)" in detail
    assert "+ 35 GB its swap backup during the teacher pass" in detail
    assert "+ 64 GB worker and rollout processes (8 GPUs x 8 GB)" in detail
    assert "+ 69 GB screenshot caches (8 GPUs x 8.6 GB, VERL_CUA_IMAGE_CACHE_GIB)" in detail
    total = int(re.search(r"= (\d+) GB of", detail).group(1))
    assert 320 <= total <= 345, detail
    monkeypatch.setenv("VERL_CUA_IMAGE_CACHE_GIB", "0")  # the cache off: its term goes
    off = next(f for f in _desktops(flagship) if f.check == "memory").detail
    assert "screenshot" not in off and int(re.search(r"= (\d+) GB of", off).group(1)) == pytest.approx(
        total - 69, abs=1
    )
    monkeypatch.delenv("VERL_CUA_IMAGE_CACHE_GIB")
    current = {**flagship, "cua": {**flagship["cua"], "sdpo": {**flagship["cua"]["sdpo"], "teacher": "current"}}}
    lean = next(f for f in _desktops(current) if f.check == "memory").detail
    assert "EMA" not in lean and int(re.search(r"= (\d+) GB of", lean).group(1)) == pytest.approx(total - 70, abs=1)


def test_the_kept_checkpoints_are_weighed_against_the_free_disk(flagship, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(footprint.shutil, "disk_usage", lambda path: usage(0, 0, 1000e9))
    params = model_params(flagship["actor_rollout_ref"]["model"]["path"])
    ok = checkpoint_finding(flagship, params)
    assert ok.level == "ok" and "~140 GB a save" in ok.detail and "16 B: fp32 weights + Adam + EMA fp32" in ok.detail
    assert "x 2 kept = 281 GB of 1000 GB free" in ok.detail
    monkeypatch.setattr(footprint.shutil, "disk_usage", lambda path: usage(0, 0, 200e9))
    short = checkpoint_finding(flagship, params)
    assert short.level == "FAIL" and "lower CKPT_KEEP" in short.detail
    unbounded = {**flagship, "trainer": {**flagship["trainer"], "max_actor_ckpt_to_keep": None}}
    warned = checkpoint_finding(unbounded, params)
    assert warned.level == "warn" and "holds 1;" in warned.detail and "CKPT_KEEP=2" in warned.detail
    never = {**flagship, "trainer": {**flagship["trainer"], "save_freq": -1}}
    assert checkpoint_finding(never, params) is None


def test_lora_checkpoints_carry_no_full_adam_state():
    lora = {"actor_rollout_ref": {"model": {"lora_rank": 16}, "actor": {}}, "algorithm": {"adv_estimator": "grpo"}}
    assert checkpoint_bytes_per_param(lora) == (4, "fp32 weights")


@pytest.mark.parametrize(("teacher", "copies"), [("ema", 2), ("frozen", 2), ("current", 0)])
def test_the_host_teacher_copy_is_counted_for_every_teacher_the_trainer_keeps_one_for(teacher, copies):
    """The trainer keeps a host fp32 copy of the teacher's weights, and its swap backup, for ema and for frozen (it
    starts, swaps and checkpoints the copy for both: `plan_for(...).host_teacher`); only current runs without one.
    The doctor once counted it for ema alone, leaving 2 x 4 B/param of host RAM and 4 B/param of checkpoint out of
    frozen."""
    from verl_cua.integrations.verl.config.schema import CuaConfig
    from verl_cua.integrations.verl.estimator_plan import plan_for

    plan = plan_for("sdpo", CuaConfig.from_mapping({"sdpo": {"teacher": teacher}}))
    # the plan's rule (`weight_teacher` before it was named host_teacher: this test also runs on that code)
    assert sum(getattr(plan, name, False) for name in ("host_teacher", "weight_teacher")) == (copies > 0)
    config = {
        "algorithm": {"adv_estimator": "sdpo"},
        "cua": {"sdpo": {"teacher": teacher}},
        "actor_rollout_ref": {"model": {}, "actor": {}},
        "trainer": {"device": "cpu", "nnodes": 1},
    }
    params = footprint.Params(8_000_000_000, "the test")
    host = sum(gb for gb, _what in footprint.host_terms(config, params))
    assert host == pytest.approx(copies * 8 * 4)  # 8B params x 4 B fp32: the copy, then its swap backup
    per_param, parts = checkpoint_bytes_per_param(config)
    assert per_param == 4 + 8 + (4 if copies else 0), parts  # fp32 weights + Adam (+ the copy's fp32 shards)
