"""bench.sdpo below verl (its training runs are verl's, minutes each; the e2e SDPO test checks that a real run logs
every metric its report reads): each variant's training command passes the trainer's start-up checks with the
estimator and loss it names, a misspelt key is refused there, and the report reads each variant against GRPO."""

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError

from bench import sdpo
from bench.short_runs import train_command


def test_every_variants_command_passes_the_trainers_checks(trainer_config, tiny_qwen25vl, tmp_path):
    configs = {
        name: trainer_config(train_command(tmp_path, tiny_qwen25vl, tmp_path / "t.parquet", name, overrides, 2))
        for name, overrides in sdpo.VARIANTS.items()
    }
    assert {n: c["algorithm"]["adv_estimator"] for n, c in configs.items()} == {
        "grpo": "grpo", "sdpo_logit": "sdpo", "sdpo_token": "sdpo"
    }  # fmt: skip
    assert [configs[n]["cua"]["sdpo"]["loss"] for n in ("sdpo_logit", "sdpo_token")] == ["logit", "token"]
    for config in configs.values():  # the same rows and batch for every variant: only the estimator differs
        assert config["data"]["train_batch_size"] == 2 and config["actor_rollout_ref"]["rollout"]["n"] == 4
        assert config["trainer"]["total_training_steps"] == 2 and config["trainer"]["device"] == "cpu"
    bad = train_command(tmp_path, tiny_qwen25vl, tmp_path / "t.parquet", "x", ("cua.sdpo.losses=token",), 2)
    with pytest.raises((ConfigCompositionException, ConfigKeyError)):
        trainer_config(bad)


def _rows(steps: list[float], per_token_ms: list[float], teacher: float = 0.0, tokens: int = 1000) -> list[dict]:
    return [{"timing_s/step": s, "timing_per_token_ms/update_actor": u, "timing_s/sdpo_teacher": teacher,
             "perf/total_num_tokens": tokens, "sdpo/reprompt_fraction": 0.5, "sdpo/topk_fields_mb": 0.7}
            for s, u in zip(steps, per_token_ms, strict=True)]  # fmt: skip


def test_the_report_reads_each_variant_after_the_warmup_against_grpo():
    runs = {"grpo": _rows([30.0, 4.0, 6.0], [1.0, 0.2, 0.2]),
            "sdpo_logit": _rows([40.0, 6.0, 8.0], [1.0, 0.3, 0.3], teacher=1.0),
            "sdpo_token": _rows([40.0, 5.0, 5.0], [1.0, 0.1, 0.1], teacher=0.5)}  # fmt: skip
    report = sdpo.report(runs, "qwen25vl", steps=3)
    assert report["grpo_step_s"] == 5.0 and report["steps_measured"] == 2  # the 30 s warm-up step is left out
    logit = report["sdpo_logit"]
    assert logit["ratio_to_grpo"] == pytest.approx(7.0 / 5.0)
    # same batch: step / (step - teacher pass - (0.3 - 0.2) ms x 1000 tokens), the median over the measured steps
    assert logit["ratio_same_batch"] == pytest.approx((6 / (6 - 1.1) + 8 / (8 - 1.1)) / 2, abs=1e-3)
    assert (logit["teacher_pass_s"], logit["reprompt_fraction"], logit["topk_fields_mb"]) == (1.0, 0.5, 0.7)
    token = report["sdpo_token"]  # a cheaper update than GRPO's adds nothing: only the teacher pass counts
    assert token["ratio_same_batch"] == pytest.approx(5 / 4.5, abs=1e-3) and token["ratio_to_grpo"] == 1.0
    assert report["target_ratio"] == sdpo.TARGET and "grpo" in report["anchor"]
