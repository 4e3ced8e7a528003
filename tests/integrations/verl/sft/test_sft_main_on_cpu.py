"""`python -m verl_cua.sft_main`: a missing SFT file stops it in one line naming `verl-cua sft-data`, before any process
group or model load; the composed config carries the sft-data columns (the full run is test_sft_ladder_on_cpu's)."""

import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module


@pytest.mark.e2e
def test_a_missing_data_file_is_one_line_naming_sft_data(tmp_path):
    missing = tmp_path / "none.parquet"
    proc = subprocess.run([sys.executable, "-m", "verl_cua.sft_main", "preset=cpu", f"data.train_files={missing}",
                           "model.path=unused"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    want = f"verl-cua sft: data.train_files: {missing} does not exist; build it with `verl-cua sft-data RUN ...`"
    assert last == want


def test_the_cpu_preset_composes_on_verls_sft_config():
    with initialize_config_module("verl_cua.integrations.verl.config.sft", version_base=None):
        cfg = compose("cua_sft", overrides=["preset=cpu"])
    assert (cfg.data.messages_key, cfg.data.image_key, cfg.data.pad_mode) == ("messages", "images", "no_padding")
    assert cfg.trainer.device == "cpu" and cfg.engine.strategy == "fsdp2" and cfg.engine.dtype == "float32"
    assert cfg.model.override_config.attn_implementation == "sdpa" and not cfg.model.use_remove_padding
    assert "hf_model" in cfg.checkpoint.save_contents and cfg.data.truncation == "error"


def test_saved_hf_configs_keep_the_base_models_dtype(tmp_path):
    """verl writes bfloat16 into every saved config; a float32 base (the CPU models) must come back float32, or the
    RL run started from it computes in bfloat16 (its KL to the reference rounds to 0)."""
    import json

    from verl_cua.integrations.verl.sft.main import keep_base_dtype

    def config(path, dtype):
        path.mkdir(parents=True)
        (path / "config.json").write_text(json.dumps({"dtype": dtype, "text_config": {"dtype": dtype}, "x": 1}))

    config(tmp_path / "fp32", "float32")
    config(tmp_path / "bf16", "bfloat16")
    for step in (1, 2):
        config(tmp_path / "ckpt" / f"global_step_{step}" / "huggingface", "bfloat16")
    assert keep_base_dtype(str(tmp_path / "bf16"), str(tmp_path / "ckpt")) == 0
    assert keep_base_dtype("Qwen/Qwen3-VL-8B-Instruct", str(tmp_path / "ckpt")) == 0  # a hub name: left as verl wrote
    assert keep_base_dtype(str(tmp_path / "fp32"), str(tmp_path / "ckpt")) == 2
    saved = json.loads((tmp_path / "ckpt" / "global_step_2" / "huggingface" / "config.json").read_text())
    assert saved == {"dtype": "float32", "text_config": {"dtype": "float32"}, "x": 1}


def test_a_lora_checkpoint_is_merged_into_plain_weights():
    """verl saves a LoRA run's HF folder under peft's names; the merge gives W + (alpha / r) B A under the plain ones
    (checked on a real LoRA SFT run too: logits equal peft's own merge_and_unload exactly)."""
    import torch

    from verl_cua.integrations.verl.sft.lora_merge import merge_lora_state

    torch.manual_seed(0)
    w, a, b, bias = torch.randn(6, 4), torch.randn(2, 4), torch.randn(6, 2), torch.randn(6)
    stem = "base_model.model.model.language_model.layers.0.self_attn.q_proj"
    state = {f"{stem}.base_layer.weight": w, f"{stem}.base_layer.bias": bias, f"{stem}.lora_A.default.weight": a,
             f"{stem}.lora_B.default.weight": b, "base_model.model.model.visual.patch.weight": w}  # fmt: skip
    merged = merge_lora_state(state, alpha=16, rank=2)
    name = "model.language_model.layers.0.self_attn.q_proj"
    assert set(merged) == {f"{name}.weight", f"{name}.bias", "model.visual.patch.weight"}
    assert torch.allclose(merged[f"{name}.weight"], w + 8 * (b @ a)) and torch.equal(merged[f"{name}.bias"], bias)
    assert torch.equal(merged["model.visual.patch.weight"], w)  # the tower had no adapter: unchanged


@pytest.mark.parametrize("rank", ["0", "1"])
def test_ctrl_c_is_one_line_from_rank_0_naming_the_last_checkpoint(tmp_path, monkeypatch, capsys, rank):
    """Every rank exits 130; rank 0 alone says where training stopped and how to resume (SFT resumes only with
    trainer.resume_mode=auto, which cua_sft.yaml leaves off)."""
    import signal

    from verl_cua.integrations.verl.sft import main as sft

    with initialize_config_module("verl_cua.integrations.verl.config.sft", version_base=None):
        cfg = compose("cua_sft", overrides=["preset=cpu", f"trainer.default_local_dir={tmp_path}"])
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("40")

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(sft, "run", interrupted)
    monkeypatch.setenv("RANK", rank)
    try:
        with pytest.raises(SystemExit) as exc:
            sft.main.__wrapped__(cfg)  # the task function under hydra.main
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert exc.value.code == 130
    lines = capsys.readouterr().err.splitlines()
    if rank == "1":
        assert lines == []
    else:
        want = (f"verl-cua sft: stopped by Ctrl-C before training started; last saved checkpoint: step 40 in "
                f"{tmp_path}; rerun the same command with trainer.resume_mode=auto to resume from it")  # fmt: skip
        assert lines == [want]
