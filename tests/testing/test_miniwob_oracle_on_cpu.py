"""The MiniWoB oracle (ground truth of several env and pool tests) solves click-button pages whose buttons differ
only by case: seed 91 shows "yes" and "Yes" for 'Click on the "Yes" button.'"""

import pytest

from verl_cua.envs import make_env
from verl_cua.testing.miniwob_oracle import dom_elements, solution


@pytest.fixture(scope="module")
def env(chromium):
    env = make_env("miniwob", task="click-button", action_format="pyautogui")
    yield env
    env.close()


def test_buttons_that_differ_only_by_case_are_told_apart(env):
    obs = env.reset({"task": "click-button", "seed": 91})
    labels = [e.get("text") for e in dom_elements(env) if e["tag"] == "BUTTON"]
    assert "yes" in labels and "Yes" in labels and '"Yes"' in obs.instruction
    assert env.step(solution(env, obs)[0]).reward == 1.0
    obs = env.reset({"task": "click-button", "seed": 91})
    assert env.step(solution(env, obs, wrong=True)[0]).reward == 0.0


@pytest.mark.parametrize("seed", [110, *range(12)])
def test_click_button_seeds_are_solved(env, seed):
    obs = env.reset({"task": "click-button", "seed": seed})
    assert env.step(solution(env, obs)[0]).reward == 1.0
