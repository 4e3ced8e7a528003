"""Edge cases found in review: overflowing numbers, regex blow-ups, unhashable values, no-op and lossy actions."""

import json
import time

import pytest

from verl_cua.actions import GUIAction as A
from verl_cua.actions import ParsedAction, parse_action

SCREEN = (1920, 1080)


def qwen(**arguments) -> str:
    return "<tool_call>" + json.dumps({"name": "computer_use", "arguments": arguments}) + "</tool_call>"


@pytest.mark.parametrize(
    "fmt,text,image",
    [
        ("claude", '{"action": "left_click", "coordinate": [1e308, 1]}', None),
        ("qwen3vl", qwen(action="left_click", coordinate=[1e306, 1]), None),
        ("claude", '{"action": "left_click", "coordinate": [' + "9" * 400 + ", 1]}", None),
        (
            "qwen25vl",
            '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": ['
            + "9" * 400
            + ", 1]}}</tool_call>",
            None,
        ),
        ("uitars", "Action: click(start_box='(" + "9" * 308 + ",1)')", (1000, 1000)),
        ("pyautogui", "```python\npyautogui.click(0x" + "f" * 300 + ", 1)\n```", None),
        ("claude", '{"action": "scroll", "scroll_direction": "up", "scroll_amount": ' + "9" * 5000 + "}", None),
        (
            "qwen3vl",
            '<tool_call>{"name": "computer_use", "arguments": {"action": "scroll", "pixels": '
            + "9" * 5000
            + "}}</tool_call>",
            None,
        ),
        ("claude", '{"action": "scroll", "scroll_direction": ["up"]}', None),
        ("claude", '{"action": "scroll", "scroll_direction": {}}', None),
        ("pyautogui", "```python\npyautogui.dragTo(1, 1, button=['left'])\n```", None),
    ],
)
def test_absurd_values_are_invalid_not_internal_errors(fmt, text, image):
    result = parse_action(text, format=fmt, screen=SCREEN, image=image)
    assert not result.valid
    assert "internal parser error" not in result.error


@pytest.mark.parametrize(
    "fmt,text",
    [
        ("uitars", "\n" * 131000 + "x"),
        ("auto", "\n" * 131000 + "x"),
        ("pyautogui", "```" + "a" * 130000),
        ("auto", "```python" + "a" * 130000),
        ("pyautogui", "```" + " " * 130000),
        ("uitars", "Action: type(content='" + "' " * 60000),
        ("uitars", "Action: click(start_box='" + "(" * 120000),
        ("qwen3vl", "<tool_call>" * 11000),
        ("pyautogui", "```python\n" * 13000),
    ],
)
def test_pathological_inputs_are_answered_in_linear_time(fmt, text):
    start = time.perf_counter()
    result = parse_action(text, format=fmt, screen=SCREEN)
    assert time.perf_counter() - start < 3.0  # the quadratic versions took 20-200 s
    assert result.error is None or "internal parser error" not in result.error


@pytest.mark.parametrize(
    "fmt,text",
    [
        ("qwen3vl", qwen(action="scroll", pixels=0)),
        ("qwen3vl", qwen(action="scroll", pixels=0.4)),
        ("claude", '{"action": "scroll", "scroll_direction": "down", "scroll_amount": 0}'),
    ],
)
def test_zero_scroll_is_invalid(fmt, text):
    result = parse_action(text, format=fmt, screen=SCREEN)
    assert not result.valid and "scroll by 0" in result.error


def test_lone_surrogate_smuggled_through_json_escapes_is_invalid():
    result = parse_action('{"action": "type", "text": "a\\ud800b"}', format="claude", screen=SCREEN)
    assert not result.valid and "surrogate" in result.error


def test_many_drags_still_render_to_code_that_parses_back():
    # 24 drags: two lines each, and 14.4 s of run time, under the per-output bound (actions.runtime)
    text = "".join(qwen(action="left_click_drag", start_coordinate=[10, 10], coordinate=[500, 500]) for _ in range(24))
    result = parse_action(text, format="qwen3vl", screen=SCREEN)
    assert result.valid and len(result.actions) == 24
    back = parse_action(f"```python\n{result.to_pyautogui()}\n```", format="pyautogui", screen=SCREEN)
    assert back.valid and back.actions == result.actions


@pytest.mark.parametrize("box", ["(1.2.3)", "(1-2)", "(1,,2)", "1,2,3,4,5", "(1, 2))"])
def test_uitars_boxes_must_be_two_or_four_plain_numbers(box):
    result = parse_action(f"Action: click(start_box='{box}')", format="uitars", screen=SCREEN, image=(1920, 1080))
    assert not result.valid


def test_uitars_content_may_contain_a_parenthesis_and_blank_line():
    result = parse_action("Action: type(content='a)\n\nb')", format="uitars", screen=SCREEN)
    assert result.valid and result.actions == [A("type", text="a)\n\nb")]


def test_uitars_calls_must_be_on_their_own_lines():
    result = parse_action("Action: click(start_box='(1,2)') click(start_box='(3,4)')", format="uitars", screen=SCREEN)
    assert not result.valid and "unexpected text" in result.error


def test_parsed_action_dataclass_is_constructible_for_renderers():
    assert ParsedAction(valid=True, actions=[A("key", keys=["ctrl", "z"])]).to_pyautogui() == (
        "pyautogui.hotkey('ctrl', 'z')"
    )
