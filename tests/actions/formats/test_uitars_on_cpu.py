"""uitars: UI-TARS-1.5 `Thought/Action` outputs, every box spelling, in the smart-resized image space."""

import pytest

from verl_cua.actions import GUIAction as A
from verl_cua.actions import parse_action

SCREEN = (1920, 1080)  # UI-TARS smart_resize -> 1932 x 1092: x px = x * 160/161, y px = y * 90/91


def out(action: str, thought: str = "I need to do the next step.") -> str:
    return f"Thought: {thought}\nAction: {action}"


VALID = [
    (out("click(start_box='<|box_start|>(161,91)<|box_end|>')"), [A("click", x=160, y=90)]),
    (out("click(start_box='(322,182)')"), [A("click", x=320, y=180)]),
    (out("click(point='<point>483 273</point>')"), [A("click", x=480, y=270)]),
    (out("click(start_point='<point>644 364</point>')"), [A("click", x=640, y=360)]),
    (out("left_single(start_box='(966,546)')"), [A("click", x=960, y=540)]),
    (out("left_double(start_box='(644,364)')"), [A("double_click", x=640, y=360)]),
    (out("right_single(start_box='(805,455)')"), [A("right_click", x=800, y=450)]),
    (out("hover(start_box='(161,91)')"), [A("move", x=160, y=90)]),
    (out("click(start_box='(161,91,483,273)')"), [A("click", x=320, y=180)]),
    (
        out("drag(start_box='<|box_start|>(161,91)<|box_end|>', end_box='<|box_start|>(966,546)<|box_end|>')"),
        [A("drag", x=160, y=90, x2=960, y2=540)],
    ),
    (
        out("drag(start_point='<point>161 91</point>', end_point='<point>322 182</point>')"),
        [A("drag", x=160, y=90, x2=320, y2=180)],
    ),
    (out("hotkey(key='ctrl c')"), [A("key", keys=["ctrl", "c"])]),
    (out("hotkey(key='enter')"), [A("key", keys=["enter"])]),
    (out("hotkey(key='arrowdown')"), [A("key", keys=["down"])]),
    (out("press(key='space')"), [A("key", keys=["space"])]),
    (out("type(content='Hello, world!')"), [A("type", text="Hello, world!")]),
    (out("type(content='it\\'s done\\n')"), [A("type", text="it's done\n")]),
    (out("type(content='He said \"hi\" and 'left'')"), [A("type", text="He said \"hi\" and 'left'")]),
    (out("scroll(start_box='(966,546)', direction='down')"), [A("scroll", x=960, y=540, dy=-5)]),
    (out("scroll(direction='up')"), [A("scroll", dy=5)]),
    (out("scroll(point='<point>161 91</point>', direction='left')"), [A("scroll", x=160, y=90, dx=-5)]),
    (out("wait()"), [A("wait")]),
    (out("finished(content='The total is 42.')"), [A("done", text="The total is 42.")]),
    (out("finished()"), [A("done")]),
    (out("call_user()"), [A("fail", text="call_user")]),
    (
        out("click(start_box='(161,91)')\n\ntype(content='abc')\n\nhotkey(key='enter')"),
        [A("click", x=160, y=90), A("type", text="abc"), A("key", keys=["enter"])],
    ),
    (
        "Reflection: The menu did not open.\nAction_Summary: Try again.\nAction: click(start_box='(161,91)')",
        [A("click", x=160, y=90)],
    ),
    ("Action: wait()", [A("wait")]),
]


@pytest.mark.parametrize("text,expected", VALID)
def test_valid_outputs_parse_to_screen_actions(text, expected):
    result = parse_action(text, format="uitars", screen=SCREEN)
    assert result.valid, result.error
    assert result.actions == expected


def test_thought_is_extracted_without_its_header():
    result = parse_action(out("wait()", thought="The page is loading."), format="uitars", screen=SCREEN)
    assert result.thought == "The page is loading."


def test_ui_tars_1_0_relative_coordinates_via_image_1000():
    result = parse_action(out("click(start_box='(500,500)')"), format="uitars", screen=SCREEN, image=(1000, 1000))
    assert result.actions == [A("click", x=960, y=540)]


def test_uitars_limits_differ_from_qwen25vl_on_small_screens():
    from verl_cua.actions.prompts import build_prompt

    assert build_prompt("uitars", screen=(200, 100)).coordinate_space == (420, 224)
    assert build_prompt("qwen25vl", screen=(200, 100)).coordinate_space == (196, 112)


INVALID = [
    ("Thought: I will click the button.", "no 'Action:'"),
    (out("click()"), "needs start_box"),
    (out("click(start_box='(abc)')"), "numbers only"),
    (out("click(start_box='(161,"), "unterminated"),
    (out("click(start_box='(161,91)'"), "not closed"),
    (out("swipe(start_box='(1,2)')"), "unknown UI-TARS action"),
    (out("scroll(direction='sideways')"), "direction"),
    (out("hotkey(key='')"), "needs key"),
    (out("click(start_box='(1,2,3)')"), "2 or 4 numbers"),
    (out("type(content='abc"), "not terminated"),
    (out("click(start_box='(1,2)') trailing words"), "unexpected text"),
    (out('click(start_box=\'__import__("os").system("id")\')'), "numbers only"),
    (out("drag(start_box='(1,2)')"), "needs end_box"),
    (out(""), "empty 'Action:'"),
]


@pytest.mark.parametrize("text,reason", INVALID)
def test_malformed_outputs_are_invalid_with_a_reason(text, reason):
    result = parse_action(text, format="uitars", screen=SCREEN)
    assert not result.valid
    assert reason in result.error, result.error
