"""`begin_step`: the opening checks every env's `step()` shares (MiniWoB and OSWorld), on real parsed model output."""

import pytest
from PIL import Image

from verl_cua.envs import EnvUsageError, Observation, StepResult, begin_step

LAST = Observation(Image.new("RGB", (200, 100)), "Click the button.")


def coords(parsed):
    """A translation: each action's pixel, refusing a scroll as an env that cannot scroll would."""
    if any(a.kind == "scroll" for a in parsed.actions):
        raise ValueError("this desktop has no scroll")
    return [(a.x, a.y) for a in parsed.actions]


def test_valid_output_gives_the_parsed_action_and_its_translation():
    parsed, sent = begin_step(LAST, False, "```python\npyautogui.click(20, 30)\n```", "pyautogui", coords)
    assert parsed.valid and sent == [(20, 30)]


def test_before_reset_is_a_caller_error_and_text_needs_a_format():
    with pytest.raises(EnvUsageError, match=r"^step\(\) before reset\(\)$"):
        begin_step(None, False, "DONE", "pyautogui", coords)
    with pytest.raises(EnvUsageError, match="no format"):
        begin_step(LAST, False, "DONE", None, coords)


def test_after_the_episode_nothing_is_parsed_or_sent():
    sent = []
    result = begin_step(LAST, True, "no action at all", "pyautogui", sent.append)
    assert isinstance(result, StepResult) and result.done and result.observation is LAST and result.reward == 0.0
    assert result.info == {"action_valid": True, "infra_failure": False, "error": "episode over; reset() first"}
    assert sent == []


def test_invalid_output_and_an_untranslatable_action_are_answered_without_sending():
    result = begin_step(LAST, False, "I would click the button.", "pyautogui", coords)
    assert isinstance(result, StepResult) and not result.done and not result.info["action_valid"]
    assert result.info["error"] and not result.info["infra_failure"]
    result = begin_step(LAST, False, "```python\npyautogui.scroll(-3)\n```", "pyautogui", coords)
    assert isinstance(result, StepResult) and not result.done
    assert result.info == {"action_valid": False, "infra_failure": False, "error": "this desktop has no scroll"}
