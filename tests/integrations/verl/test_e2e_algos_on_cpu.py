"""The algorithms on real verl 0.9.1 training steps on the CPU (`python -m verl_cua.main preset=cpu`, hf rollout,
real Chromium MiniWoB++, FSDP2 on CPU), two steps each of `sdpo` (the defaults: logit-level loss, EMA teacher; with
an Entropulse `fixed` schedule) and `gigpo` (with CoSo's bonus, `cua.coso.enable`); SDPO's defaults on Qwen3-VL's
step rows run through verl's vLLM rollout (tests/integrations/vllm_cpu/); `sdpo_grpo` with replay, the EMA teacher
and Entropulse runs in test_chaos_on_cpu (through browser kills, a killed trainer and a resume). The Qwen2.5-VL runs
start from the ladder's SFT checkpoint (the `sft_model` fixture: the oracle's runs -> sft-data -> verl SFT), whose
clicks are mostly valid and a fair share hit: the success buffer fills, and failures remain. bench.sdpo and
bench.coso read their figures from these runs' metrics too (their own training runs are minutes each: a renamed
metric would read as 0 there)."""

import pytest

from bench import coso as coso_bench
from bench import sdpo as sdpo_bench
from verl_cua.integrations.verl import dataset
from verl_cua.testing.cpu_train import train_on_cpu as _train

pytestmark = pytest.mark.e2e  # every test trains with verl

COMMON = (
    "data.train_batch_size=2",
    "actor_rollout_ref.rollout.n=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "cua.env.max_steps=2",
    "cua.action.max_tokens_per_step=48",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory, sft_model):
    # click-test seeds 84 and 116 draw 99 px and 98 px buttons at (18, 52) and (22, 59). The SFT checkpoint hit them
    # in 0.54 and 0.67 of 24 sampled first turns each (valid 0.96; measured), so a run of 32 episodes without a
    # success, or without a failure, has odds below 1e-8
    _base, model, _work = sft_model
    train = tmp_path_factory.mktemp("algos") / "train.parquet"
    assert dataset.main(["--env", "miniwob", "--tasks", "click-test", "--seeds", "84,116", "--out", str(train)]) == 0
    return str(model), train


def test_sdpo_teacher_pass_and_an_entropulse_sft_phase(setup, tmp_path):
    model, train = setup
    run = _train(
        tmp_path,
        model,
        train,
        *COMMON,
        "algorithm.adv_estimator=sdpo",
        "cua.sdpo.demo=false",  # feedback only: rows with valid actions throughout have nothing new to learn from
        "cua.entropulse.schedule=fixed",
        "cua.entropulse.rl_steps=2",
        "cua.entropulse.sft_steps=1",
        "cua.entropulse.sft_batch_size=2",
    )
    first, second = run["steps"]
    for m in (first, second):
        # every reprompted row's teacher context holds the feedback block and the final screenshot as an image
        assert m["sdpo/reprompt_fraction"] > 0
        assert m["sdpo/teacher_blocks_with_image"] == round(m["sdpo/reprompt_fraction"] * m["cua/episodes"])
        assert m["sdpo/teacher_added_tokens_mean"] > 20
        # the teacher scores the same tokens differently; rows without a reprompt get exactly zero advantage
        assert m["sdpo/teacher_minus_student_abs"] > 1e-3
        assert m["sdpo/not_reprompted_adv_abs_max"] == 0.0
        assert m["timing_s/sdpo_teacher"] > 0
        assert m["cua/step_field_fetches"] == 1  # one fetch for the teacher pass, the advantage step and the buffer
    assert first["sdpo/not_reprompted_rows"] + second["sdpo/not_reprompted_rows"] > 0
    # Entropulse, fixed schedule every 2 RL steps: no SFT after step 1, one SFT phase after step 2
    assert first["entropulse/sft_phases"] == 0 and first["entropulse/phase"] == 0
    assert second["entropulse/phase"] == 1 and second["entropulse/sft_phases"] == 1
    assert second["entropulse/sft_steps"] == 1
    assert second["buffer/size"] > 0, "no success to learn from; the warm start should hit click-test's buttons"
    # the SFT step's loss is the negative log-likelihood of the buffered successes' model tokens
    assert second["entropulse/sft_loss_first"] > 0
    # (the NLL comes from the bf16 log-probs verl's compute_log_prob returns, hence the tolerance)
    assert second["entropulse/sft_loss_first"] == pytest.approx(second["entropulse/sft_nll_before"], rel=1e-2)
    assert second["entropulse/sft_loss_first"] != pytest.approx(second["actor/pg_loss"], rel=1e-2)
    # bench.sdpo's report on this run (as its own anchor): every metric it reads is logged, the teacher pass costs
    assert all(set(sdpo_bench.READS) <= set(m) for m in run["steps"])
    report = sdpo_bench.report(dict.fromkeys(sdpo_bench.VARIANTS, run["steps"]), "qwen25vl", len(run["steps"]))
    logit = report["sdpo_logit"]
    assert logit["teacher_pass_s"] > 0 and logit["ratio_same_batch"] > 1 and logit["topk_fields_mb"] > 0


def test_gigpo_step_groups_with_the_coso_bonus(setup, tmp_path):
    # CoSo rides on this run (no extra CI run): its bonus changes the loss, not GiGPO's groups or advantages
    model, train = setup
    run = _train(tmp_path, model, train, *COMMON, "algorithm.adv_estimator=gigpo", "cua.coso.enable=true")
    for m in run["steps"]:
        # missed clicks leave the screen unchanged, so identical screens recur across the group's episodes
        assert m["gigpo/step_groups"] >= 1 and m["gigpo/step_group_size_mean"] >= 2
        assert m["critic/advantages/max"] > 0
        # the SFT model writes `pyautogui.click(x, y)`: its coordinates' tokens cause the action, so B > 0 there
        assert 0 < m["coso/causal_fraction"] <= 1 and 0 < m["coso/weight_mean"] <= 1
        assert m["coso/causal_fraction_rows"] > 0 and m["coso/weight_s"] > 0
        assert m["coso/weighted_entropy"] > 0 and m["coso/bonus"] > 0
        assert set(coso_bench.READS) <= set(m)  # bench.coso's report reads these of a CoSo run
    report = coso_bench.report(dict.fromkeys(coso_bench.VARIANTS, run["steps"]), "qwen25vl", len(run["steps"]), 3008)
    assert report["coso"]["weight_s"] > 0 and 0 < report["coso"]["causal_fraction"] <= 1
    assert report["coso"]["ratio_same_batch"] > 1  # as its own anchor: the weights' seconds are all it adds
