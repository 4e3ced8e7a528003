"""`format="auto"` detects unambiguous formats and refuses to guess; caller errors raise clear ValueErrors."""

import json

import pytest

from verl_cua.actions import available_formats, parse_action

SCREEN = (1920, 1080)


@pytest.mark.parametrize(
    "text,fmt",
    [
        ("Thought: go\nAction: click(start_box='(10,10)')", "uitars"),
        ("```python\npyautogui.click(1, 2)\n```", "pyautogui"),
        ("DONE", "pyautogui"),
        (json.dumps({"action": "left_click", "coordinate": [1, 2]}), "claude"),
    ],
)
def test_auto_detects_unambiguous_formats(text, fmt):
    result = parse_action(text, format="auto", screen=SCREEN)
    assert result.valid and result.format == fmt


def test_auto_refuses_to_guess_between_the_two_qwen_coordinate_spaces():
    text = (
        '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [1, 2]}}</tool_call>'
    )
    result = parse_action(text, format="auto", screen=SCREEN)
    assert not result.valid and "ambiguous" in result.error and "qwen25vl" in result.error


def test_auto_with_nothing_recognisable():
    result = parse_action("I am not sure what to do.", format="auto", screen=SCREEN)
    assert not result.valid and "no known format" in result.error


def test_unknown_format_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        parse_action("x", format="qwen4", screen=SCREEN)
    for name in available_formats():
        assert name in str(err.value)


@pytest.mark.parametrize("screen", [(0, 10), (1920,), "1920x1080", (1920.0, 1080), (True, 10), (10**6, 10)])
def test_bad_screen_is_a_caller_error(screen):
    with pytest.raises(ValueError, match="screen must be"):
        parse_action("DONE", format="pyautogui", screen=screen)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("", "empty output"),
        ("   \n ", "empty output"),
        (b"\xff\xfe", "not valid UTF-8"),
        (None, "must be text"),
        ("x" * 200_000, "at most"),
        ("a\udcffb", "not valid UTF-8"),
    ],
)
def test_unusable_text_is_invalid_not_an_exception(text, reason):
    result = parse_action(text, format="pyautogui", screen=SCREEN)
    assert not result.valid and reason in result.error


def test_bytes_in_utf8_are_accepted():
    assert parse_action(b"DONE", format="pyautogui", screen=SCREEN).valid


def test_too_many_statements_or_actions_is_invalid():
    body = "\n".join("pyautogui.press('a')" for _ in range(200))
    result = parse_action(f"```python\n{body}\n```", format="pyautogui", screen=SCREEN)
    assert not result.valid and "200 statements; at most 136" in result.error
    body = "\n".join("pyautogui.press('a')" for _ in range(80))
    result = parse_action(f"```python\n{body}\n```", format="pyautogui", screen=SCREEN)
    assert not result.valid and "80 actions; at most 64" in result.error
