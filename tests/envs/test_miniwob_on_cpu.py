"""The miniwob env in real headless Chromium: screenshots in, parsed actions out, success in [0, 1]."""

import json
import os
import signal
import tempfile
import time

import pytest

from verl_cua.actions import parse_action
from verl_cua.envs import EnvUsageError, make_env
from verl_cua.envs.miniwob import task_names
from verl_cua.testing.miniwob_oracle import solution


@pytest.fixture(scope="module")
def env(chromium):
    env = make_env("miniwob", task="click-button", action_format="pyautogui", screenshot_scale=2)
    yield env
    env.close()


def test_scripted_click_solves_click_button(env):
    obs = env.reset({"task": "click-button", "seed": 1})
    assert obs.screen == (320, 420) and "button" in obs.instruction
    assert "elements" not in obs.extra and "elements_text" not in obs.extra  # the default `screenshot` reads none
    result = env.step(solution(env, obs)[0])
    assert result.done and result.reward == 1.0 and env.evaluate() == 1.0
    assert result.info["action_valid"] and not result.info["infra_failure"] and result.info["error"] is None
    assert 0 < result.info["env_reward"] <= 1


def test_wrong_button_ends_the_episode_unsolved(env):
    obs = env.reset("click-button")
    result = env.step(solution(env, obs, wrong=True)[0])
    assert result.done and result.reward == 0.0 and env.evaluate() == 0.0
    assert not result.info["infra_failure"]


def test_typing_task_solved_through_three_model_outputs_and_a_parsed_action(env):
    obs = env.reset("enter-text")
    outputs = solution(env, obs)
    for text in outputs[:-1]:
        assert not env.step(text).done
    last = parse_action(outputs[-1], format="pyautogui", screen=obs.screen)
    result = env.step(last)
    assert result.done and result.reward == 1.0


def test_invalid_and_unsupported_actions_are_not_sent(env):
    obs = env.reset("click-button")
    before = obs.screenshot.tobytes()
    for text, why in [
        ("I am not sure.", "no ```python"),
        ("```python\nimport os\n```", "import of 'os'"),
        ("```python\npyautogui.rightClick(10, 10)\n```", "right or middle"),
        ("```python\npyautogui.hotkey('ctrl', 'w')\n```", "close or navigate"),
    ]:
        result = env.step(text)
        assert not result.info["action_valid"] and why in result.info["error"]
        assert not result.done and result.observation.screenshot.tobytes() == before


def test_qwen3vl_coordinates_are_scaled_to_the_task_area(env):
    obs = env.reset("click-button")
    x, y = (int(v) for v in solution(env, obs)[0].split("click(")[1].split(")")[0].split(", "))
    nx, ny = round(x * 1000 / obs.screen[0]), round(y * 1000 / obs.screen[1])
    call = {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [nx, ny]}}
    text = f"<tool_call>{json.dumps(call)}</tool_call>"
    assert env.step(text, format="qwen3vl").reward == 1.0


def test_agent_done_ends_the_episode_without_success(env):
    env.reset("click-button")
    result = env.step("DONE")
    assert result.done and result.reward == 0.0


def test_every_task_name_is_available_and_unknown_ones_are_listed():
    names = task_names()
    assert len(names) == 128 and "click-button" in names and "book-flight" in names
    with pytest.raises(EnvUsageError, match="valid tasks: .*click-button"):
        make_env("miniwob", task="click-buton")


def test_a_slow_model_is_not_failed_by_miniwobs_ten_second_clock(env):
    # MiniWoB ends an episode with -1 "timed out" 10 s after reset, model latency included; our env lifts that
    obs = env.reset({"task": "click-button", "seed": 2})
    time.sleep(10.5)
    result = env.step(solution(env, obs)[0])
    assert result.done and result.reward == 1.0 and result.info["reason"] != "timed out"


def test_a_time_limit_restores_miniwobs_clock(chromium):
    env = make_env("miniwob", task="click-button", action_format="pyautogui", time_limit_s=0.5)
    try:
        obs = env.reset({"task": "click-button", "seed": 2})
        right = solution(env, obs)[0]
        time.sleep(1.0)
        result = env.step(right)
        assert result.done and result.reward == 0.0 and result.info["reason"] == "timed out"
        obs = env.reset({"task": "click-button", "seed": 2})  # the limit holds for every episode, and a quick one wins
        assert env.step(solution(env, obs)[0]).reward == 1.0
    finally:
        env.close()
    for bad in (0, -1, "10", 3e6):
        with pytest.raises(ValueError, match="time_limit_s must be None"):
            make_env("miniwob", time_limit_s=bad)


def _browser_temp_entries() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("org.chromium.")}


def test_closing_or_restarting_the_browser_leaves_no_temporary_profile_behind(chromium, private_tmpdir):
    # ChromeDriver's profile (~6.5 MB) and Chromium's socket dir used to stay in /tmp after every browser start
    before = _browser_temp_entries()
    env = make_env("miniwob", task="click-test", action_format="pyautogui")
    try:
        env.reset("click-test")
        first = _browser_temp_entries() - before
        assert any(".scoped_dir." in name for name in first) and any(".scoped_dir." not in name for name in first)
        env.reset("focus-text")  # another task: a new browser
        second = _browser_temp_entries() - before
        assert second and not second & first
    finally:
        env.close()
    assert _browser_temp_entries() - before == set()


def test_a_browser_that_died_leaves_at_most_chromedrivers_empty_scratch_dir(chromium, private_tmpdir):
    before = _browser_temp_entries()
    env = make_env("miniwob", task="click-test", action_format="pyautogui")
    try:
        env.reset("click-test")
        for pid in env.pids():
            os.kill(pid, signal.SIGKILL)
    finally:
        env.close()
    left = _browser_temp_entries() - before
    # the profile and the socket dir are gone; a killed ChromeDriver cannot remove its own empty scratch dir
    assert all(".scoped_dir." in name and not os.listdir(os.path.join(tempfile.gettempdir(), name)) for name in left)
    assert len(left) <= 1


def test_caller_errors_raise(env, chromium):
    with pytest.raises(EnvUsageError, match="before reset"):
        make_env("miniwob").step("DONE")  # no task yet: no browser is started either
    env.reset("click-test")
    env.action_format = None
    try:
        with pytest.raises(EnvUsageError, match="no format"):
            env.step("DONE")
    finally:
        env.action_format = "pyautogui"


def test_unknown_env_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid envs: .*miniwob"):
        make_env("minwob")
