"""bench.coso below verl (its two training runs are verl's, minutes each; the e2e CoSo test checks that a real run logs
every metric its report reads): both variants' training commands pass the trainer's start-up checks and differ only
in CoSo, and the report reads CoSo's step, update and weights against GRPO's."""

import pytest

from bench import coso
from bench.short_runs import train_command


def test_both_commands_pass_the_trainers_checks_and_differ_only_in_coso(trainer_config, tiny_qwen25vl, tmp_path):
    data = tmp_path / "train.parquet"
    grpo, with_coso = (
        trainer_config(train_command(tmp_path, tiny_qwen25vl, data, name, coso.VARIANTS[name], 3))
        for name in ("grpo", "coso")
    )
    assert (grpo["cua"]["coso"]["enable"], with_coso["cua"]["coso"]["enable"]) == (False, True)
    assert grpo["algorithm"]["adv_estimator"] == with_coso["algorithm"]["adv_estimator"] == "grpo"
    grpo["cua"]["coso"], with_coso["cua"]["coso"] = {}, {}
    for config in (grpo, with_coso):  # the run folders differ by name
        config["trainer"].pop("default_local_dir")
    assert grpo == with_coso


def _row(step: float, update: float, per_token_ms: float, weight_s: float = 0.0, tokens: int = 2000) -> dict:
    return {"timing_s/step": step, "timing_s/update_actor": update, "timing_per_token_ms/update_actor": per_token_ms,
            "perf/total_num_tokens": tokens, "coso/weight_s": weight_s, "coso/weight_ms_per_token": weight_s / 2,
            "coso/causal_fraction": 0.3, "coso/weight_mean": 0.4}  # fmt: skip


def test_the_report_reads_coso_after_the_warmup_against_grpo():
    runs = {"grpo": [_row(20.0, 9.0, 1.0), _row(3.0, 1.0, 0.2), _row(3.0, 1.0, 0.2)],
            "coso": [_row(20.0, 9.0, 1.0, 1.0), _row(4.0, 1.5, 0.3, 0.5), _row(4.0, 1.5, 0.3, 0.5)]}  # fmt: skip
    report = coso.report(runs, "qwen25vl", steps=3, vocab=3008)
    assert report["grpo"] == {"step_s": 3.0, "update_actor_s": 1.0, "update_ms_per_token": 0.2}  # warm-up left out
    figures = report["coso"]
    assert figures["ratio_to_grpo"] == pytest.approx(4 / 3, abs=1e-3) and figures["update_ratio_to_grpo"] == 1.5
    # same batch: step / (step - weights - (0.3 - 0.2) ms x 2000 tokens)
    assert figures["ratio_same_batch"] == pytest.approx(4 / (4 - 0.5 - 0.2), abs=1e-3)
    assert figures["weight_share_of_step"] == pytest.approx(0.5 / 4) and figures["causal_fraction"] == 0.3
    assert report["entropy_mb_per_token"] == round(4 * 3008 / 2**20, 3) and report["steps_measured"] == 2
