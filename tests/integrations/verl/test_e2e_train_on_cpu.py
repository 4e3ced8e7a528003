"""Real verl 0.9.1 training steps on the CPU through `python -m verl_cua.main`: hf rollout -> gui_agent on real
envs -> reward -> FSDP2 update -> weight sync, with tiny random Qwen2.5-VL and Qwen3-VL (MiniWoB++, GRPO). The GRPO
run trains on a format and an env that a plug-in package registered (examples/plugin, through the `verl_cua.plugins`
entry point: the driver's config check and the Ray workers' agent loops must both know them). Training on the local
OSWorld desktop is test_chaos_on_cpu's (with desktops killed mid-episode). Each run takes minutes; they are the point
of the CPU suite."""

from pathlib import Path

import pytest
from safetensors.torch import load_file

from verl_cua.integrations.verl import dataset
from verl_cua.testing.cpu_train import train_on_cpu as _train


def _weights_changed(before_dir: str, after_dir: Path) -> float:
    before = {}
    for f in Path(before_dir).glob("*.safetensors"):
        before.update(load_file(f))
    after = {}
    for f in after_dir.glob("*.safetensors"):
        after.update(load_file(f))
    common = [k for k in before if k in after and before[k].shape == after[k].shape]
    assert len(common) >= len(before) * 0.9, (len(common), len(before))
    return max((after[k].float() - before[k].float()).abs().max().item() for k in common)


def _check_step_metrics(steps: list[dict], episodes: int) -> None:
    assert len(steps) == 2
    for m in steps:
        for key in ("critic/rewards/mean", "cua/success_rate", "cua/invalid_action_rate", "cua/infra_failures"):
            assert key in m, key
        assert m["cua/episodes"] == episodes
        assert m["cua/infra_failures"] == 0
        assert m["cua/step_field_fetches"] == 1  # the batch's extra fields came to the driver once this step
        # screenshots after the first turn live in the response and are never trained on
        assert m["cua/response_observation_tokens"] > 0 and m["cua/response_model_tokens"] > 0
        assert m["cua/response_image_tokens_masked"] > 0 and m["cua/response_image_tokens_trained"] == 0
        for key in ("timing_s/gen", "timing_s/update_actor", "timing_s/update_weights", "timing_s/step"):
            assert m[key] > 0, key


def _check_trace(trace: Path, steps: list[dict]) -> None:
    """Every rollout of both steps is traced, and the trainer wrote GRPO's advantage onto each of its steps."""
    from verl_cua.envs.trajectory import read_run

    for index, metrics in enumerate(steps, start=1):
        meta, episodes = read_run(trace / f"step_{index:06d}")
        assert len(episodes) == 2 * N and metrics["cua/traced_episodes"] == 2 * N
        assert (meta["estimator"], meta["global_step"], meta["rollout_n"]) == ("grpo", index, N)
        groups: dict[str, list] = {}
        for key, ep in episodes.items():
            result = ep.result
            assert result["steps"] == len(ep.steps) >= 1 and len(result["step_advantages"]) == result["steps"]
            # GRPO: one advantage for the whole episode, so every turn's mean is the same
            assert max(result["step_advantages"]) - min(result["step_advantages"]) < 1e-5, key
            groups.setdefault(key.rsplit("/", 1)[1].split("-")[0], []).append(result)
        assert sorted(len(g) for g in groups.values()) == [N, N]  # 2 prompts x rollout.n
        uniform = 0
        for group in groups.values():  # within a group the advantages are centred and follow the reward
            advantages = [r["step_advantages"][0] for r in group]
            best, worst = max(group, key=lambda r: r["reward"]), min(group, key=lambda r: r["reward"])
            if best["reward"] - worst["reward"] <= 1e-6:  # no signal: exactly 0 (verl alone leaves ~0.015 here)
                uniform += 1
                assert advantages == [0.0] * N
                continue
            assert abs(sum(advantages)) < 1e-3
            assert best["step_advantages"][0] > 0 > worst["step_advantages"][0]
        assert metrics["cua/uniform_reward_groups"] == uniform / 2


N = 8  # rollouts per prompt


def _check_logged_images(tensorboard_dir: Path, steps: int, per_step: int) -> None:
    """`cua.trace.log_episodes`: every traced step sent `per_step` episode images (and their actions) to tensorboard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tensorboard_dir), size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    images = sorted(tag for tag in events.Tags()["images"] if tag.startswith("cua/episodes/"))
    assert images == [f"cua/episodes/{i}" for i in range(per_step)], events.Tags()["images"]
    for tag in images:
        assert sorted(e.step for e in events.Images(tag)) == list(range(1, steps + 1))
        assert all(e.height > 256 for e in events.Images(tag))  # 256-px frames under a header: a filmstrip


def test_two_grpo_steps_on_miniwob_from_the_sft_checkpoint(sft_model, tmp_path, chromium, monkeypatch, example_plugin):
    # The plug-in's `miniwob-clicks` env (MiniWoB++'s click tasks) and `pyautogui_one` format (pyautogui, one action a
    # turn), added by their registrations alone. RL from the ladder's SFT checkpoint (test_sft_ladder_on_cpu: the
    # oracle's runs -> sft-data -> verl SFT). On
    # click-test seeds 84 and 116 (99 px buttons) its sampled first turns hit 0.54 and 0.67 of the time (24 each,
    # valid 0.96; measured), so a group of 8 comes out uniform with odds of about 0.54^8 + 0.46^8 = 0.01, all four
    # groups about 1e-8
    _base, sft, _work = sft_model
    path = str(sft)
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tb"))
    train = tmp_path / "train.parquet"
    args = ["--env", "miniwob-clicks", "--tasks", "click-test", "--seeds", "84,116", "--out", str(train)]
    assert dataset.main(args) == 0
    run = _train(
        tmp_path,
        path,
        train,
        "cua.env.name=miniwob-clicks",
        "cua.action.format=pyautogui_one",
        "data.train_batch_size=2",
        f"actor_rollout_ref.rollout.n={N}",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "algorithm.adv_estimator=grpo",
        "cua.env.max_steps=2",
        "cua.action.max_tokens_per_step=24",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.actor.optim.weight_decay=0",
        # the learnable setting's lr (docs/learning.md): at the preset's 1e-4 one update moves the sharp SFT policy by
        # less than the low-variance KL estimator resolves in fp32 (exactly 0.0 measured; 0.0066 at 2e-3)
        "actor_rollout_ref.actor.optim.lr=2e-3",
        # a KL loss to the reference policy: the ref worker builds on the CPU (verl pins its offloaded params)
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        f"cua.trace.dir={tmp_path / 'trace'}",
        "cua.trace.log_episodes=2",  # traced episodes as images in the user's logger (tensorboard here)
        "trainer.logger=[console,file,tensorboard]",
    )
    _check_step_metrics(run["steps"], episodes=2 * N)
    # the CPU preset trains in fp32, as the hf rollout samples (verl's FSDP default is bf16): the trainer's
    # log-probs of the sampled tokens are the rollout's own
    assert all(m["training/rollout_probs_diff_max"] < 1e-4 for m in run["steps"]), run["steps"][0]
    _check_logged_images(tmp_path / "tb", steps=2, per_step=2)
    assert [m["cua/logged_episodes"] for m in run["steps"]] == [2, 2]
    # the reference is the initial policy: no divergence before the first update, some after it
    assert run["steps"][0]["actor/kl_loss"] == pytest.approx(0.0, abs=1e-6)
    assert run["steps"][1]["actor/kl_loss"] > 0
    _check_trace(tmp_path / "trace", run["steps"])
    # rewards differed within a group (a hit and a miss, or an invalid output), so GRPO produced a signal ...
    # (a group of 8 with any spread gives its best member at least +0.35; a uniform group gives exactly 0)
    assert any(m["critic/advantages/max"] > 0.3 for m in run["steps"]), [m["critic/rewards/max"] for m in run["steps"]]
    # ... and with no entropy bonus and no weight decay, only that signal can have moved the weights
    assert run["hf_dir"] is not None
    assert _weights_changed(path, run["hf_dir"]) > 0, "the actor's weights did not change"
