"""The run time of one output is bounded when it is parsed: an output that would run past the desktop's action
timeout (many waits, a huge `write`) is invalid with one line, before anything reaches a desktop."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verl_cua.actions import parse_action
from verl_cua.actions.runtime import CALL_SECONDS, CHAR_SECONDS, MAX_RUN_SECONDS, run_seconds
from verl_cua.actions.types import GUIAction

SCREEN = (1920, 1080)
LONGEST = int((MAX_RUN_SECONDS - CALL_SECONDS) / CHAR_SECONDS)  # the most characters one write may type


def _write(n: int) -> str:
    return f"pyautogui.write({'a' * n!r})"


def test_a_write_is_refused_one_character_past_the_bound_and_accepted_at_it():
    assert parse_action(_write(LONGEST), format="pyautogui", screen=SCREEN).valid
    over = parse_action(_write(LONGEST + 10), format="pyautogui", screen=SCREEN)
    assert not over.valid and "characters typed" in over.error and "\n" not in over.error


@pytest.mark.parametrize(
    ("fmt", "one_wait"),
    [("pyautogui", "time.sleep(1)\n"), ("qwen3vl", None)],
)
def test_many_waits_are_refused_in_every_format_that_writes_them(fmt, one_wait):
    if one_wait is None:
        call = json.dumps({"name": "computer_use", "arguments": {"action": "wait", "time": 1}})
        text = f"<tool_call>{call}</tool_call>" * 40
    else:
        text = one_wait * 40
    result = parse_action(text, format=fmt, screen=SCREEN)
    assert not result.valid and "40 waits" in result.error, result
    few = parse_action(text[: len(text) // 8], format=fmt, screen=SCREEN)
    assert few.valid, few.error


@given(st.lists(st.sampled_from(["click", "wait", "drag", "key", "type"]), min_size=1, max_size=64),
       st.integers(0, 20000))  # fmt: skip
def test_the_estimate_grows_with_every_action_and_character(kinds, chars):
    actions = [GUIAction(k, text="x" * chars if k == "type" else None) for k in kinds]
    seconds = run_seconds(actions)
    assert seconds >= CALL_SECONDS * len(kinds) - 1e-9
    assert run_seconds([*actions, GUIAction("wait")]) > seconds


def test_a_scroll_of_thousands_of_clicks_is_refused():
    result = parse_action("pyautogui.scroll(10000)", format="pyautogui", screen=SCREEN)
    assert not result.valid and "10000 scroll clicks" in result.error, result
    assert parse_action("pyautogui.scroll(10)", format="pyautogui", screen=SCREEN).valid
