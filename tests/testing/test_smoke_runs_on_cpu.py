"""`verl_cua.testing.smoke_runs`: the GPU smoke recipe's verdict from verl's file-logger lines."""

import json

from verl_cua.testing.smoke_runs import main


def _log(path, steps):
    lines = [{"step": i + 1, "data": {"timing_s/step": 10.0 + i, "critic/rewards/mean": 0.5}} for i in range(steps)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_every_run_must_log_the_steps_asked(tmp_path, capsys):
    _log(tmp_path / "grpo_lora0.jsonl", 2)
    _log(tmp_path / "sdpo_lora16.jsonl", 2)
    assert main([str(tmp_path), "--steps", "2"]) == 0
    _log(tmp_path / "gigpo_lora0.jsonl", 1)  # a run that died after one step
    assert main([str(tmp_path), "--steps", "2"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  gigpo_lora0: 1/2 steps" in out and "ok    grpo_lora0: 2/2 steps" in out


def test_no_runs_is_a_failure(tmp_path):
    assert main([str(tmp_path)]) == 1
