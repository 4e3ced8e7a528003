"""qwen3vl: real-looking Qwen3-VL computer_use outputs -> screen actions (0..1000 normalised coordinates)."""

import json

import pytest

from verl_cua.actions import GUIAction as A
from verl_cua.actions import parse_action

SCREEN = (1920, 1080)  # x px = x * 1.92, y px = y * 1.08


def call(**arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments}) + "\n</tool_call>"


VALID = [
    (call(action="left_click", coordinate=[500, 500]), [A("click", x=960, y=540)]),
    ("I will open the File menu.\n" + call(action="left_click", coordinate=[25, 10]), [A("click", x=48, y=11)]),
    (call(action="right_click", coordinate=[100, 200]), [A("right_click", x=192, y=216)]),
    (call(action="double_click", coordinate=[250, 750]), [A("double_click", x=480, y=810)]),
    (call(action="triple_click", coordinate=[0, 0]), [A("triple_click", x=0, y=0)]),
    (call(action="middle_click", coordinate=[999, 999]), [A("middle_click", x=1918, y=1079)]),
    (call(action="mouse_move", coordinate=[125, 450]), [A("move", x=240, y=486)]),
    (call(action="left_click_drag", coordinate=[600, 400]), [A("drag", x2=1152, y2=432)]),
    (call(action="type", text="quarterly report\n"), [A("type", text="quarterly report\n")]),
    (call(action="key", keys=["ctrl", "shift", "t"]), [A("key", keys=["ctrl", "shift", "t"])]),
    (call(action="key", keys=["Return"]), [A("key", keys=["enter"])]),
    (call(action="key", keys=["super"]), [A("key", keys=["win"])]),
    (call(action="scroll", pixels=-5), [A("scroll", dy=-5)]),
    (call(action="scroll", pixels=3, coordinate=[500, 250]), [A("scroll", x=960, y=270, dy=3)]),
    (call(action="hscroll", pixels=-2), [A("scroll", dx=-2)]),
    (call(action="wait", time=2), [A("wait")]),
    (call(action="terminate", status="success"), [A("done")]),
    (call(action="terminate", status="failure"), [A("fail")]),
    (call(action="answer", text="42"), [A("done", text="42")]),
    (
        call(action="left_click", coordinate=[500, 100])
        + "\n"
        + call(action="type", text="hello")
        + "\n"
        + call(action="key", keys=["enter"]),
        [A("click", x=960, y=108), A("type", text="hello"), A("key", keys=["enter"])],
    ),
    (  # arguments sent as a JSON string by some servers
        '<tool_call>\n{"name": "computer_use", "arguments": "{\\"action\\": \\"left_click\\", '
        '\\"coordinate\\": [500, 500]}"}\n</tool_call>',
        [A("click", x=960, y=540)],
    ),
    (call(action="left_click", coordinate=[1000, 1000]), [A("click", x=1919, y=1079)]),
    (call(action="left_click"), [A("click")]),  # the schema makes coordinate optional: click at the cursor
    (call(action="left_click", coordinate="(500, 250)"), [A("click", x=960, y=270)]),
    (call(action="left_click", coordinate={"x": 500, "y": 250}), [A("click", x=960, y=270)]),
]


@pytest.mark.parametrize("text,expected", VALID)
def test_valid_outputs_parse_to_screen_actions(text, expected):
    result = parse_action(text, format="qwen3vl", screen=SCREEN)
    assert result.valid, result.error
    assert result.error is None
    assert result.actions == expected
    assert result.format == "qwen3vl"


def test_thought_is_the_prose_outside_tool_calls_and_think_tags():
    text = "<think>The Save button is top left.</think>\n" + call(action="left_click", coordinate=[10, 10])
    assert parse_action(text, format="qwen3vl", screen=SCREEN).thought == "The Save button is top left."


def test_out_of_range_coordinates_are_clamped_and_reported():
    result = parse_action(call(action="left_click", coordinate=[1200, -5]), format="qwen3vl", screen=SCREEN)
    assert result.valid
    assert result.actions == [A("click", x=1919, y=0)]
    assert "outside 0..1000" in result.error and "clamped" in result.error


INVALID = [
    ('<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [50', "not valid JSON"),
    ("I think I should click the button.", "no <tool_call>"),
    (
        '<tool_call>{"name": "browser", "arguments": {"action": "left_click", "coordinate": [1, 2]}}</tool_call>',
        "expected 'computer_use'",
    ),
    (call(action="swipe", coordinate=[1, 2]), "unknown computer_use action"),
    (call(action="mouse_move"), "needs 'coordinate'"),
    (call(action="left_click_drag"), "needs 'coordinate'"),
    (call(action="left_click", coordinate=["abc", 2]), "must be a number"),
    (call(action="left_click", coordinate=[1, 2, 3]), "coordinate must be [x, y]"),
    (call(action="left_click", coordinate="(1, 2); import os"), "coordinate must be [x, y]"),
    (call(action="terminate", status="maybe"), "status"),
    (call(action="key", keys=["hyperdrive"]), "unknown key"),
    (call(action="type"), "needs 'text'"),
    (call(action="scroll"), "needs 'pixels'"),
    (call(action="left_click", coordinate=[float("nan"), 1]).replace("NaN", "NaN"), "finite"),
    ('<tool_call>["left_click"]</tool_call>', "JSON object"),
    (call(action="terminate", status="success") + call(action="left_click", coordinate=[1, 1]), "last action"),
]


@pytest.mark.parametrize("text,reason", INVALID)
def test_malformed_outputs_are_invalid_with_a_reason(text, reason):
    result = parse_action(text, format="qwen3vl", screen=SCREEN)
    assert not result.valid
    assert result.actions == []
    assert reason in result.error
    assert "\n" not in result.error
