"""qwen25vl: Qwen2.5-VL computer_use outputs, coordinates in the smart-resized image the model saw."""

import json

import pytest

from verl_cua.actions import GUIAction as A
from verl_cua.actions import parse_action

SCREEN = (1920, 1080)  # smart_resize -> 1932 x 1092: x px = x * 160/161, y px = y * 90/91


def call(**arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments}) + "\n</tool_call>"


VALID = [
    (call(action="left_click", coordinate=[966, 546]), [A("click", x=960, y=540)]),
    ("Click the search box.\n" + call(action="left_click", coordinate=[161, 91]), [A("click", x=160, y=90)]),
    (call(action="right_click", coordinate=[322, 182]), [A("right_click", x=320, y=180)]),
    (call(action="double_click", coordinate=[483, 273]), [A("double_click", x=480, y=270)]),
    (call(action="middle_click", coordinate=[644, 364]), [A("middle_click", x=640, y=360)]),
    (call(action="mouse_move", coordinate=[805, 455]), [A("move", x=800, y=450)]),
    (call(action="left_click_drag", coordinate=[1288, 728]), [A("drag", x2=1280, y2=720)]),
    (call(action="type", text="Monthly sales"), [A("type", text="Monthly sales")]),
    (call(action="key", keys=["ctrl", "s"]), [A("key", keys=["ctrl", "s"])]),
    (call(action="key", keys=["Escape"]), [A("key", keys=["esc"])]),
    (call(action="key", keys=["control", "a"]), [A("key", keys=["ctrl", "a"])]),
    (call(action="scroll", pixels=-10), [A("scroll", dy=-10)]),
    (call(action="scroll", pixels=10, coordinate=[966, 546]), [A("scroll", x=960, y=540, dy=10)]),
    (call(action="wait", time=1), [A("wait")]),
    (call(action="terminate", status="success"), [A("done")]),
    (call(action="terminate", status="failure"), [A("fail")]),
    (call(action="left_click", coordinate=[1932, 1092]), [A("click", x=1919, y=1079)]),
    (
        call(action="left_click", coordinate=[161, 91]) + call(action="type", text="x"),
        [A("click", x=160, y=90), A("type", text="x")],
    ),
]


@pytest.mark.parametrize("text,expected", VALID)
def test_valid_outputs_parse_in_default_smart_resized_space(text, expected):
    result = parse_action(text, format="qwen25vl", screen=SCREEN)
    assert result.valid, result.error
    assert result.error is None
    assert result.actions == expected


def test_explicit_image_size_sets_the_coordinate_space():
    text = call(action="left_click", coordinate=[640, 360])
    result = parse_action(text, format="qwen25vl", screen=SCREEN, image=(1280, 720))
    assert result.actions == [A("click", x=960, y=540)]


def test_coordinates_beyond_the_resized_image_are_clamped_and_reported():
    result = parse_action(call(action="left_click", coordinate=[2000, 50]), format="qwen25vl", screen=SCREEN)
    assert result.valid and result.actions == [A("click", x=1919, y=49)]
    assert "outside 0..1932 x 0..1092" in result.error


@pytest.mark.parametrize(
    "screen,expected",
    [((1920, 1080), (1932, 1092)), ((1280, 720), (1288, 728)), ((3840, 2160), (3836, 2156)), ((200, 100), (196, 112))],
)
def test_default_image_is_qwen25vl_smart_resize(screen, expected):
    from verl_cua.actions.prompts import build_prompt

    assert build_prompt("qwen25vl", screen=screen).coordinate_space == expected


@pytest.mark.parametrize(
    "text,reason",
    [
        ('<tool_call>\n{"name": "computer_use", "arguments": {"action": "type", "text": "hel', "not valid JSON"),
        ("", "empty output"),
        (call(action="mouse_move"), "needs 'coordinate'"),
        (call(action="answer"), "needs 'text'"),
        (call(coordinate=[1, 2]), "no 'action'"),
        ('<tool_call>{"name": "computer_use"}</tool_call>', "no 'arguments'"),
    ],
)
def test_malformed_outputs_are_invalid_with_a_reason(text, reason):
    result = parse_action(text, format="qwen25vl", screen=SCREEN)
    assert not result.valid and reason in result.error
