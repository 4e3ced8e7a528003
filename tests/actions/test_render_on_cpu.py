"""Rendering: pyautogui code and computer_13 dicts built from actions, never from model text."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.actions import GUIAction as A
from verl_cua.actions import ParsedAction, parse_action
from verl_cua.actions.keys import VALID_KEYS, normalize_key

SCREEN = (1920, 1080)
CANONICAL_KEYS = sorted({normalize_key(k) for k in VALID_KEYS})

xs, ys = st.integers(0, 1919), st.integers(0, 1079)
ACTION = st.one_of(
    st.builds(
        lambda k, x, y: A(k, x=x, y=y),
        st.sampled_from(["click", "double_click", "triple_click", "right_click", "middle_click", "move"]),
        xs,
        ys,
    ),
    st.builds(lambda x, y, x2, y2: A("drag", x=x, y=y, x2=x2, y2=y2), xs, ys, xs, ys),
    st.builds(lambda x, y, d: A("scroll", x=x, y=y, dy=d), xs, ys, st.integers(-50, 50).filter(bool)),
    st.builds(lambda d: A("scroll", dx=d), st.integers(-50, 50).filter(bool)),
    st.builds(lambda t: A("type", text=t), st.text(min_size=1, max_size=40)),
    st.builds(lambda ks: A("key", keys=ks), st.lists(st.sampled_from(CANONICAL_KEYS), min_size=1, max_size=4)),
    st.just(A("wait")),
)


@settings(max_examples=300, deadline=None)
@given(actions=st.lists(ACTION, min_size=1, max_size=6))
def test_rendered_pyautogui_code_parses_back_to_the_same_actions(actions):
    code = ParsedAction(valid=True, actions=actions).to_pyautogui()
    back = parse_action(f"```python\n{code}\n```" if code != "WAIT" else code, format="pyautogui", screen=SCREEN)
    assert back.valid, (code, back.error)
    assert back.actions == actions


@pytest.mark.parametrize(
    "actions,code",
    [
        ([A("click", x=1, y=2)], "pyautogui.click(1, 2)"),
        ([A("click")], "pyautogui.click()"),
        ([A("drag", x2=5, y2=6)], "pyautogui.dragTo(5, 6, duration=0.5, button='left')"),
        ([A("scroll", x=3, y=4, dy=-5)], "pyautogui.scroll(-5, x=3, y=4)"),
        ([A("key", keys=["ctrl", "c"])], "pyautogui.hotkey('ctrl', 'c')"),
        ([A("type", text="it's")], 'pyautogui.write("it\'s")'),
        ([A("wait")], "WAIT"),
        ([A("done")], "DONE"),
        ([A("fail", text="impossible")], "FAIL"),
        ([A("type", text="x"), A("done")], "pyautogui.write('x')"),
    ],
)
def test_pyautogui_rendering(actions, code):
    assert ParsedAction(valid=True, actions=actions).to_pyautogui() == code


@pytest.mark.parametrize(
    "action,dicts",
    [
        (
            A("click", x=1, y=2),
            [{"action_type": "CLICK", "parameters": {"button": "left", "x": 1, "y": 2, "num_clicks": 1}}],
        ),
        (A("double_click", x=1, y=2), [{"action_type": "DOUBLE_CLICK", "parameters": {"x": 1, "y": 2}}]),
        (
            A("triple_click", x=1, y=2),
            [{"action_type": "CLICK", "parameters": {"button": "left", "x": 1, "y": 2, "num_clicks": 3}}],
        ),
        (A("right_click", x=1, y=2), [{"action_type": "RIGHT_CLICK", "parameters": {"x": 1, "y": 2}}]),
        (
            A("middle_click", x=1, y=2),
            [{"action_type": "CLICK", "parameters": {"button": "middle", "x": 1, "y": 2, "num_clicks": 1}}],
        ),
        (A("move", x=1, y=2), [{"action_type": "MOVE_TO", "parameters": {"x": 1, "y": 2}}]),
        (
            A("drag", x=1, y=2, x2=3, y2=4),
            [
                {"action_type": "MOVE_TO", "parameters": {"x": 1, "y": 2}},
                {"action_type": "DRAG_TO", "parameters": {"x": 3, "y": 4}},
            ],
        ),
        (A("scroll", dy=-3), [{"action_type": "SCROLL", "parameters": {"dy": -3}}]),
        (A("type", text="hi"), [{"action_type": "TYPING", "parameters": {"text": "hi"}}]),
        (A("key", keys=["enter"]), [{"action_type": "PRESS", "parameters": {"key": "enter"}}]),
        (A("key", keys=["ctrl", "s"]), [{"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "s"]}}]),
        (A("wait"), [{"action_type": "WAIT"}]),
        (A("done"), [{"action_type": "DONE"}]),
        (A("fail"), [{"action_type": "FAIL"}]),
    ],
)
def test_computer13_rendering(action, dicts):
    assert ParsedAction(valid=True, actions=[action]).to_computer13() == dicts


def test_invalid_results_refuse_to_render():
    bad = parse_action("nonsense", format="pyautogui", screen=SCREEN)
    with pytest.raises(ValueError, match="invalid"):
        bad.to_pyautogui()


def test_to_dict_is_json_ready_and_round_trips():
    import json

    result = parse_action(
        "Thought: t\nAction: drag(start_box='(1,2)', end_box='(3,4)')",
        format="uitars",
        screen=SCREEN,
        image=(1920, 1080),
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["valid"] and data["thought"] == "t" and data["format"] == "uitars"
    assert [A.from_dict(a) for a in data["actions"]] == result.actions
    with pytest.raises(ValueError, match="valid kinds"):
        A.from_dict({"kind": "teleport"})


def test_terminal_property():
    assert parse_action("DONE", format="pyautogui", screen=SCREEN).terminal == "done"
    assert parse_action("WAIT", format="pyautogui", screen=SCREEN).terminal is None
