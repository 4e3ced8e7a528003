"""The algorithms on real verl 0.9.1 training steps on the CPU (`python -m verl_cua.main preset=cpu`, hf rollout,
real Chromium MiniWoB++, FSDP2 on CPU), two steps each of `sdpo` (the defaults: logit-level loss, EMA teacher; with
an Entropulse `fixed` schedule), `sdpo_grpo` (ARPO-style replay) and `gigpo`, and one `sdpo` step on
Qwen3-VL. The Qwen2.5-VL runs start from the ladder's SFT checkpoint (the `sft_model` fixture: the oracle's runs ->
sft-data -> verl SFT), whose clicks are mostly valid and a fair share hit: the success buffer fills, and failures
remain."""

import json

import pytest

from verl_cua.integrations.verl import dataset
from verl_cua.integrations.verl.checkpoint_io import content_digest, ema_shard_path, load_tensor_file, read_state_dir
from verl_cua.integrations.verl.cua_state import state_digests
from verl_cua.testing.cpu_train import train_on_cpu as _train
from verl_cua.testing.tiny_models import build_tiny_model

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


def test_sdpo_grpo_with_replay_ema_teacher_and_entropulse_resumes_with_all_our_state(setup, tmp_path):
    """Two steps saved each step (verl keeps one actor checkpoint), then the same command resumed to step 3: the
    resumed trainer holds exactly the saved Entropulse state, success buffer, sampler state and EMA teacher (content
    digests against the files of global_step_2), and the metrics file and traces show steps 1, 2 and 3 once each."""
    model, train = setup
    trace = tmp_path / "trace"
    args = (
        *COMMON,
        "algorithm.adv_estimator=sdpo_grpo",
        "cua.replay.enable=true",
        # every group that is not all-success counts as "all-fail", so step 2 replays whatever step 1 buffered
        "cua.replay.std_threshold=1.0",
        "cua.replay.mean_threshold=1.0",
        "cua.sdpo.ema_rate=0.5",
        "cua.entropulse.schedule=fixed",  # an SFT phase after every RL step
        "cua.entropulse.rl_steps=1",
        "cua.entropulse.sft_steps=1",
        "cua.entropulse.sft_batch_size=2",
        f"cua.trace.dir={trace}",
        "trainer.save_freq=1",
        "trainer.max_actor_ckpt_to_keep=1",
    )
    run = _train(tmp_path, model, train, *args)
    first, second = run["steps"]
    for m in run["steps"]:
        assert m["sdpo/reprompt_fraction"] > 0 and m["sdpo/teacher_minus_student_abs"] > 1e-3
        assert m["critic/advantages/max"] > 0 > m["critic/advantages/min"]
        assert m["sdpo/teacher_is_ema"] == 1.0
        assert m["checkpoint/cua_state_mb"] > 0
    assert first["replay/injected"] == 0
    # step 2: buffered successes replace episodes of their own instance's groups (before verl pads the batch); the
    # replayed rows go through old log-probs, GRPO grouping and the update like any row (step rows: unit-tested).
    # Step 1 buffers nothing in about 2% of runs (16 episodes hitting 20-30% each), and then there is nothing to replay
    if first["buffer/size"] > 0:
        assert second["replay/injected"] >= 1
    assert second["cua/episodes"] == 16  # group accounting intact: 2 prompts x 8 episodes
    # a success teaches its failed siblings: its actions are in their teacher context
    assert max(m["sdpo/demo_fraction"] for m in run["steps"]) > 0

    ckpt = tmp_path / "ckpt"
    saved, manifest = read_state_dir(ckpt / "global_step_2")
    assert manifest["global_step"] == 2 and manifest["settings"]["algorithm.adv_estimator"] == "sdpo_grpo"
    assert len(saved["buffer"]["tasks"]) >= 1 or second["buffer/size"] == 0
    assert saved["entropulse"]["total_rl_steps"] == 2 and len(saved["entropulse"]["early_values"]) == 2
    # retention follows verl's: max_actor_ckpt_to_keep=1 removed step 1's actor, and our state of step 1 with it
    assert not (ckpt / "global_step_1" / "actor").exists() and not (ckpt / "global_step_1" / "cua").exists()
    ema_saved = content_digest(load_tensor_file(ema_shard_path(ckpt / "global_step_2" / "actor", 0)))

    resumed = _train(tmp_path, model, train, *args, "trainer.resume_mode=auto", steps=3)
    log = (tmp_path / "train.log").read_text()
    (line,) = [x for x in log.splitlines() if "verl-cua resumed: " in x]  # Ray prefixes the actor's name
    report = json.loads(line.split("verl-cua resumed: ", 1)[1])
    assert report["step"] == 2
    assert {k: report[k] for k in ("entropulse", "buffer", "rng", "totals")} == state_digests(saved)
    assert report["ema_teacher"] == [ema_saved]
    assert report["buffer_trajectories"] == second["buffer/size"]
    third = resumed["steps"][-1]
    # the failure: a fresh state would restart these counts (SFT phases 2 -> 1, buffer 3 -> 1)
    # (rl_steps=1: step 3 pulses too, and a non-empty buffer means its SFT phase ran)
    assert third["entropulse/sft_phases"] == saved["entropulse"]["phases_completed"] + (third["buffer/size"] > 0)
    assert third["buffer/size"] >= second["buffer/size"]
    assert third["cua/infra_failures_total"] >= second["cua/infra_failures_total"]
    # verl's metrics file and our traces: steps 1, 2, 3 exactly once
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sorted(r["step"] for r in records if "cua/episodes" in r["data"]) == [1, 2, 3]
    assert [r["data"]["cua/episodes"] for r in records if "cua/episodes" in r["data"]][:2] == [16, 16]
    assert sorted(p.name for p in trace.glob("step_*")) == ["step_000001", "step_000002", "step_000003"]


def test_sdpo_logit_loss_with_the_ema_teacher_on_qwen3vl_step_rows(tmp_path, chromium):
    """The defaults (logit-level loss over the student's top-100 ids, EMA teacher, reprompted-token mean) on the
    other model family and the step layout: a cold tiny Qwen3-VL, whose invalid outputs give every failed row
    feedback to learn from."""
    model = str(build_tiny_model("qwen3vl"))
    train = tmp_path / "train.parquet"
    assert dataset.main(["--env", "miniwob", "--tasks", "click-test", "--seeds", "84", "--out", str(train)]) == 0
    run = _train(
        tmp_path,
        model,
        train,
        "data.train_batch_size=1",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=1",
        "cua.env.max_steps=2",
        "cua.env.rows=step",
        "cua.action.max_tokens_per_step=24",
        "cua.action.format=qwen3vl",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "algorithm.adv_estimator=sdpo",
        steps=1,
    )
    (m,) = run["steps"]
    assert m["sdpo/teacher_is_ema"] == 1.0 and m["sdpo/reprompt_fraction"] > 0
    assert m["cua/steps_mean"] > 1  # episodes of two steps: two rows each
    assert m["actor/sdpo/divergence"] > 0 and m["actor/grad_norm"] > 0  # the top-k divergence trains the policy
    assert m["actor/pg_loss"] > 0  # a divergence, not -A log pi (which the token loss gives, of either sign)


def test_gigpo_step_groups(setup, tmp_path):
    model, train = setup
    run = _train(tmp_path, model, train, *COMMON, "algorithm.adv_estimator=gigpo")
    for m in run["steps"]:
        # missed clicks leave the screen unchanged, so identical screens recur across the group's episodes
        assert m["gigpo/step_groups"] >= 1 and m["gigpo/step_group_size_mean"] >= 2
        assert m["critic/advantages/max"] > 0
