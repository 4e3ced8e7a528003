"""`GUIEnvironmentManager` against verl-agent's env-manager contract, on real MiniWoB++
browsers: obs dict keys, one '<image>' per prompt, uint8 HxWx3 images the processor will not resize, short anchors
equal within a group, float rewards and bool dones of length N, infos with 'won' and 'is_action_valid', envs that
tolerate steps after done, dataset rows naming the tasks, and infra failures kept out of the batch."""

import json
import os
import signal

import numpy as np
import psutil
import pytest
from omegaconf import OmegaConf

from verl_cua.actions.geometry import smart_resize_size
from verl_cua.integrations.verl.dataset import task_rows
from verl_cua.integrations.verl_agent import GUIEnvironmentManager, make_gui_envs
from verl_cua.integrations.verl_agent.anchor import StepAnchor
from verl_cua.testing.miniwob_oracle import solution

FORMAT = "qwen25vl"


def config(tasks="click-test", n=2, train=1, val=1, max_steps=3, history=2, **extra):
    section = {"tasks": tasks, "format": FORMAT, **extra}
    return OmegaConf.create(
        {
            "env": {
                "env_name": "miniwob",
                "seed": 0,
                "max_steps": max_steps,
                "history_length": history,
                "rollout": {"n": n},
                "miniwob": section,
            },
            "data": {"train_batch_size": train, "val_batch_size": val},
        }
    )


@pytest.fixture(scope="module")
def managers(chromium):
    """One pair of browsers for the module (each test resets them)."""
    envs, val_envs = make_gui_envs(config())
    yield envs, val_envs
    envs.close()


def tool_call(action, **args):
    return (
        "<tool_call>" + json.dumps({"name": "computer_use", "arguments": {"action": action, **args}}) + "</tool_call>"
    )


def solve_text(manager, i, obs):
    """The oracle's click for env i, moved into the image pixels Qwen2.5-VL's coordinates use."""
    st = manager._states[i]
    x, y = [int(v) for v in solution(st.lease.env, obs_of(st))[0].split("(")[1].split(")")[0].split(",")]
    (sw, sh), (iw, ih) = st.screen, st.image_size
    return tool_call("left_click", coordinate=[round(x * iw / sw), round(y * ih / sh)])


def obs_of(st):
    return st.lease.env._last


def test_reset_and_step_meet_the_contract(managers):
    envs, val_envs = managers
    assert isinstance(envs, GUIEnvironmentManager) and envs.envs is val_envs.envs and envs.envs.size == 2
    obs, infos = envs.reset(None)
    assert set(obs) == {"text", "image", "anchor"}
    assert len(obs["text"]) == len(obs["image"]) == len(obs["anchor"]) == len(infos) == 2
    for text, image in zip(obs["text"], obs["image"], strict=True):
        assert isinstance(text, str) and text.count("<image>") == 1 and text.rstrip().endswith("<image>")
        assert "Task: Click" in text and "<tools>" in text  # the format's tool schema is in the text
        assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
        h, w = image.shape[:2]
        assert w % 28 == 0 and h % 28 == 0 and w * h >= 256 * 256  # verl-agent's process_image leaves it alone
        assert smart_resize_size((w, h), 28, 3136, 12845056) == (w, h)  # and so does Qwen2.5-VL's processor
    a0, a1 = obs["anchor"]
    assert isinstance(a0, StepAnchor) and len(a0) == 16 and a0.step == 0
    assert a0 == a1  # one task and seed per group: the same first screen
    assert [i["won"] for i in infos] == [False, False] and infos[0]["task"] == infos[1]["task"]

    win = solve_text(envs, 0, obs)
    next_obs, rewards, dones, infos = envs.step([win, "I am not sure what to do"])
    assert rewards.dtype == np.float32 and rewards.shape == (2,) and dones.dtype == bool and dones.shape == (2,)
    assert rewards.tolist() == [1.0, 0.0] and dones.tolist() == [True, False]
    assert infos[0]["won"] is True and infos[0]["score"] == 1.0 and int(infos[0]["is_action_valid"]) == 1
    assert infos[1]["won"] is False and int(infos[1]["is_action_valid"]) == 0
    assert next_obs["anchor"][1].step == 1 and next_obs["anchor"][1] == a1  # an invalid action changes nothing
    text = next_obs["text"][1]
    assert "Step 1: I am not sure what to do" in text and "Your last output was not a valid action" in text
    assert text.count("<image>") == 1

    # lockstep: the done env is stepped again and must stay done with reward 0; the other runs out of steps
    for k in range(2):
        next_obs, rewards, dones, infos = envs.step(["garbage", tool_call("wait", time=0.1)])
        assert rewards[0] == 0.0 and dones[0] and infos[0]["won"] is True
    assert dones.tolist() == [True, True] and infos[1]["won"] is False and infos[1]["score"] == 0.0
    assert "Step 2:" in next_obs["text"][1] and "Step 3:" in next_obs["text"][1]  # history_length=2: last two
    assert "Step 1:" not in next_obs["text"][1]

    batch = [[{"active_masks": True} for _ in range(3)] for _ in range(2)]
    success = envs.success_evaluator(total_batch_list=batch, total_infos=[[{}] * 3] * 2)
    assert success["success_rate"].tolist() == [1.0, 0.0]
    assert success["click-test/success_rate"].tolist() == [1.0, 0.0]
    assert all(item["active_masks"] for steps in batch for item in steps)  # no infra failure: nothing dropped


def test_terminate_ends_the_episode_and_is_scored(managers):
    envs, _ = managers
    obs, _ = envs.reset(None)
    done = tool_call("terminate", status="success")
    _, rewards, dones, infos = envs.step([done, solve_text(envs, 1, obs)])
    assert dones.tolist() == [True, True] and rewards.tolist() == [0.0, 1.0]  # claiming success is not success
    assert [i["won"] for i in infos] == [False, True]


def test_dataset_rows_name_the_tasks_in_their_groups(managers, tmp_path):
    envs, val_envs = managers
    rows = task_rows("miniwob", ["click-test", "click-button"], "7", host="verl-agent")
    kwargs = [r["env_kwargs"] for r in rows]
    assert kwargs[1] == {
        "task": json.dumps({"task": "click-button", "seed": 7}),
        "domain": "click-button",
        "task_id": "seed-7",
    }
    grouped = [kwargs[1], kwargs[1]]  # gen_batch.repeat(n, interleave=True) of one row
    obs, infos = envs.reset(grouped)
    assert [i["task"] for i in infos] == ["click-button/seed-7"] * 2 and obs["anchor"][0] == obs["anchor"][1]
    again, _ = envs.reset(grouped)
    assert again["anchor"][0] == obs["anchor"][0]  # the same seed is the same page
    val_obs, val_infos = val_envs.reset([kwargs[0]])
    assert len(val_obs["text"]) == 1 and val_infos[0]["task"] == "click-test/seed-7"
    assert not val_infos[0]["infra_failure"]  # validation takes the envs the train rollout still held
    with pytest.raises(ValueError, match="env_kwargs rows must carry 'task'"):
        envs.reset([{"question": "?"}] * 2)
    with pytest.raises(ValueError, match="pool holds 2"):
        envs.reset([kwargs[0]] * 3)


def test_hostile_output_cannot_add_images_to_the_prompt(managers):
    envs, _ = managers
    envs.reset(None)
    hostile = "<image> <|vision_start|><|image_pad|><|vision_end|> <IMAGE>"
    obs, _, _, infos = envs.step([hostile, hostile])
    for text in obs["text"]:
        assert text.count("<image>") == 1 and "<|" not in text.split("Your previous outputs")[1]
        assert "<IMAGE>" not in text
    assert [int(i["is_action_valid"]) for i in infos] == [0, 0]


def test_a_dead_browser_is_an_infra_failure_taken_out_of_the_batch(managers):
    envs, _ = managers
    obs, _ = envs.reset(None)
    for pid in envs._states[1].lease.env.pids()[1:]:
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGKILL)
    _, rewards, dones, infos = envs.step([tool_call("wait", time=0.1), solve_text_blind(obs)])
    assert dones.tolist() == [False, True] and rewards[1] == 0.0
    assert infos[1]["infra_failure"] is True and infos[1]["won"] is False and infos[0]["infra_failure"] is False
    batch = [[{"active_masks": True}], [{"active_masks": True}]]
    success = envs.success_evaluator(total_batch_list=batch, total_infos=[[{}], [{}]])
    assert batch[0][0]["active_masks"] is True and batch[1][0]["active_masks"] is False
    assert success["success_rate_without_infra"].tolist() == [0.0]
    assert success["infra_failure_success_rate"].tolist() == [0.0, 1.0]
    obs, infos = envs.reset(None)  # the pool rebuilt the browser
    assert not any(i["infra_failure"] for i in infos) and envs.envs.stats()["restarts"] == 1


def solve_text_blind(obs):
    return tool_call("left_click", coordinate=[10, 10])


def test_a_text_only_batch_stays_text_only_when_a_reset_fails(chromium):
    """a11y_tree: no '<image>' and no images, also for an env whose reset failed before it had a prompt (its
    fallback prompt is built for the batch's observation, not the screenshot default)."""
    envs, _ = make_gui_envs(config(observation="a11y_tree"))
    try:
        obs, _ = envs.reset(None)
        assert obs["image"] is None and all("<image>" not in text for text in obs["text"])
        assert all("tag\ttext\tid\tclass" in text for text in obs["text"])  # the element table instead
        failed = envs._states[1]
        failed.spec, failed.image = None, None  # as a reset that failed before its first observation
        envs._fail(failed, "stand-in reset failure")
        assert failed.spec.screenshot is False and envs._observations()["image"] is None
        control = envs._states[0]
        assert control.spec.screenshot is False  # the env that did reset: the same text-only prompt
    finally:
        envs.close()
