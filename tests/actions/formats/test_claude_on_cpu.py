"""claude: Anthropic computer-use tool inputs (bare, tool_use blocks, whole messages) -> screen actions."""

import json

import pytest

from verl_cua.actions import GUIAction as A
from verl_cua.actions import parse_action

SCREEN = (1920, 1080)


def inp(**kw) -> str:
    return json.dumps(kw)


VALID = [
    (inp(action="left_click", coordinate=[100, 200]), [A("click", x=100, y=200)]),
    (inp(action="right_click", coordinate=[300, 400]), [A("right_click", x=300, y=400)]),
    (inp(action="middle_click", coordinate=[5, 6]), [A("middle_click", x=5, y=6)]),
    (inp(action="double_click", coordinate=[50, 60]), [A("double_click", x=50, y=60)]),
    (inp(action="triple_click", coordinate=[70, 80]), [A("triple_click", x=70, y=80)]),
    (inp(action="mouse_move", coordinate=[960, 540]), [A("move", x=960, y=540)]),
    (
        inp(action="left_click_drag", start_coordinate=[10, 20], coordinate=[300, 400]),
        [A("drag", x=10, y=20, x2=300, y2=400)],
    ),
    (inp(action="left_click_drag", coordinate=[300, 400]), [A("drag", x2=300, y2=400)]),
    (inp(action="type", text="=SUM(A1:A10)\n"), [A("type", text="=SUM(A1:A10)\n")]),
    (inp(action="key", text="ctrl+s"), [A("key", keys=["ctrl", "s"])]),
    (inp(action="key", text="Return"), [A("key", keys=["enter"])]),
    (inp(action="key", text="ctrl+shift+Tab"), [A("key", keys=["ctrl", "shift", "tab"])]),
    (inp(action="key", text="super"), [A("key", keys=["win"])]),
    (inp(action="key", text="Page_Down"), [A("key", keys=["pagedown"])]),
    (inp(action="key", text="ctrl+a Delete"), [A("key", keys=["ctrl", "a"]), A("key", keys=["delete"])]),
    (inp(action="left_click"), [A("click")]),  # no coordinate: at the cursor, as the tool allows
    (
        inp(action="scroll", coordinate=[960, 540], scroll_direction="down", scroll_amount=3),
        [A("scroll", x=960, y=540, dy=-3)],
    ),
    (inp(action="scroll", scroll_direction="left", scroll_amount=2), [A("scroll", dx=-2)]),
    (inp(action="wait", duration=1), [A("wait")]),
    (inp(action="screenshot"), [A("wait")]),
    (
        json.dumps(
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "computer",
                "input": {"action": "left_click", "coordinate": [1, 2]},
            }
        ),
        [A("click", x=1, y=2)],
    ),
    (
        json.dumps(
            [
                {"type": "text", "text": "Opening the menu."},
                {"type": "tool_use", "id": "t1", "name": "computer", "input": {"action": "key", "text": "alt+f"}},
                {"type": "tool_use", "id": "t2", "name": "computer", "input": {"action": "type", "text": "x"}},
            ]
        ),
        [A("key", keys=["alt", "f"]), A("type", text="x")],
    ),
    (
        json.dumps({"role": "assistant", "content": [{"type": "text", "text": "The file is saved."}]}),
        [A("done", text="The file is saved.")],
    ),
]


@pytest.mark.parametrize("text,expected", VALID)
def test_valid_outputs_parse_to_screen_actions(text, expected):
    result = parse_action(text, format="claude", screen=SCREEN)
    assert result.valid, result.error
    assert result.actions == expected


def test_coordinates_are_in_claudes_scaled_screenshot_when_image_is_given():
    result = parse_action(
        inp(action="left_click", coordinate=[640, 360]), format="claude", screen=SCREEN, image=(1280, 720)
    )
    assert result.actions == [A("click", x=960, y=540)]


def test_text_blocks_are_the_thought():
    text = json.dumps(
        {
            "content": [
                {"type": "text", "text": "Click Save."},
                {"type": "tool_use", "name": "computer", "input": {"action": "wait"}},
            ]
        }
    )
    assert parse_action(text, format="claude", screen=SCREEN).thought == "Click Save."


INVALID = [
    (inp(action="hold_key", text="shift", duration=1), "not supported"),
    (inp(action="left_mouse_down"), "not supported"),
    (inp(action="teleport"), "unknown computer action"),
    (inp(action="mouse_move"), "needs 'coordinate'"),
    (inp(action="left_click_drag", start_coordinate=[1, 2]), "needs 'coordinate'"),
    ('{"action": "left_click", "coordinate": [1, ', "not valid JSON"),
    (json.dumps({"type": "tool_use", "name": "bash", "input": {"command": "ls"}}), "expected 'computer'"),
    (inp(action="scroll", scroll_direction="sideways", scroll_amount=1), "scroll_direction"),
    (inp(action="scroll", scroll_direction="up", scroll_amount=10**6), "scroll_amount"),
    (inp(action="key"), "needs 'text'"),
    ("[1, 2, 3]", "expected a JSON object"),
    (inp(action="left_click", coordinate=[1, 2], text="shift"), "while holding"),
    ('{"foo": 1}', "unrecognised JSON object"),
]


@pytest.mark.parametrize("text,reason", INVALID)
def test_malformed_outputs_are_invalid_with_a_reason(text, reason):
    result = parse_action(text, format="claude", screen=SCREEN)
    assert not result.valid
    assert reason in result.error, result.error
