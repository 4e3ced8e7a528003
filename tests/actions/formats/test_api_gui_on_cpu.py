"""api_gui (ComputerRL's API-GUI space): one ```python line calling an Agent primitive or an app API, parsed by ast
into GUI actions or one checked `api` action; model text is data, never code."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.actions import GUIAction as A
from verl_cua.actions import parse_action, render_action
from verl_cua.actions.apis import Param, apis_for, lookup_api
from verl_cua.actions.prompts import build_prompt, turn_context

SCREEN = (1920, 1080)


def code(line: str, think: str = "") -> str:
    return (f"<think>{think}</think>\n" if think else "") + f"```python\n{line}\n```"


VALID = [
    (code("Agent.click(coordinates=[100, 200])"), [A("click", x=100, y=200)]),
    (code("Agent.click([100, 200], 2)"), [A("double_click", x=100, y=200)]),
    (code("Agent.click(coordinates=[5, 6], num_clicks=3)"), [A("triple_click", x=5, y=6)]),
    (code("Agent.click(coordinates=[5, 6], button_type='right')"), [A("right_click", x=5, y=6)]),
    (code("Agent.click(coordinates=[5, 6], button_type='middle')"), [A("middle_click", x=5, y=6)]),
    (code("Agent.type(text='hello')"), [A("type", text="hello")]),
    (
        code("Agent.type(coordinates=[10, 20], text='42', overwrite=True, enter=True)"),
        [A("click", x=10, y=20), A("key", keys=["ctrl", "a"]), A("type", text="42"), A("key", keys=["enter"])],
    ),
    (
        code("Agent.drag_and_drop(drag_from_coordinates=[1, 2], drop_on_coordinates=[30, 40])"),
        [A("drag", x=1, y=2, x2=30, y2=40)],
    ),
    (code("Agent.scroll(coordinates=[500, 500], direction='down')"), [A("scroll", x=500, y=500, dy=-5)]),
    (code("Agent.hotkey(keys=['ctrl', 's'])"), [A("key", keys=["ctrl", "s"])]),
    (code("Agent.hotkey(keys='ctrl+shift+s')"), [A("key", keys=["ctrl", "shift", "s"])]),
    (code("Agent.wait()"), [A("wait")]),
    (code("Agent.exit(success=True)"), [A("done")]),
    (code("Agent.exit(success=False)"), [A("fail")]),
    (code("Agent.open_app(app_name='vlc')"), [A("api", api="Agent.open_app", args={"app_name": "vlc"})]),
    ("Agent.wait()", [A("wait")]),  # no fence: the line itself
    ("```Agent.wait()```", [A("wait")]),
]


@pytest.mark.parametrize("text,expected", VALID)
def test_valid_outputs_parse_to_their_actions(text, expected):
    parsed = parse_action(text, format="api_gui", screen=SCREEN)
    assert parsed.valid, parsed.error
    assert [a.to_dict() for a in parsed.actions] == [a.to_dict() for a in expected]


def test_the_think_block_and_prose_are_the_thought_and_backticks_in_strings_stay_data():
    text = "<think>Title first.</think>\nI search.\n```python\nAgent.type(text='a ``` b </think>')\n```\nThen save."
    parsed = parse_action(text, format="api_gui", screen=SCREEN)
    assert parsed.valid, parsed.error
    assert parsed.actions[0].text == "a ``` b </think>"
    assert parsed.thought == "Title first.\nI search.\nThen save."


INVALID = [
    (code("Agent.click(coordinates=[1, 2])\nAgent.wait()"), "exactly one call"),
    (code("import os"), "import is not allowed"),
    (code("x = Agent.wait()"), "assign is not allowed"),
    (code("Agent.type(text=open('/etc/passwd').read())"), "not allowed"),
    (code("Agent.type(text=__import__('os').getcwd())"), "not allowed"),
    (code("Agent.type(text=f'{1}')"), "f-string"),
    (code("Agent.type(text=secret)"), "not allowed"),
    (code("Agent.type(**{'text': 'x'})"), "**kwargs"),
    (code("os.path.join('a')"), "Tool.method"),
    (code("print('x')"), "Tool.method"),
    (code("(lambda: 1)()"), "Tool.method"),
    (code("Agent.clik(coordinates=[1, 2])"), "did you mean click"),
    (code("Agent.click(coordinates=[1, 2], speed=3)"), "'speed' is not a parameter"),
    (code("Agent.click(coordinates=[1])"), "coordinates must be [x, y]"),
    (code("Agent.click(coordinates=[1, 2], num_clicks=4)"), "4 clicks"),
    (code("Agent.scroll(coordinates=[1, 2], direction='left')"), "direction"),
    (code("Agent.exit(success='yes')"), "True or False"),
    (code("Agent.hotkey()"), "needs keys"),
    (code("Agent.hotkey(keys=['ctrl', 'nosuchkey'])"), "key"),
    (code("Agent.open_app(app_name='rm -rf /')"), "valid: 'libreoffice calc'"),
    (code("Agent.open_app()"), "needs 'app_name'"),
    (code("Agent.switch_window(title=3)"), "title must be str"),
    (code("Agent.switch_window(title='x' * 5)"), "not allowed"),
    (code("EvilTools.run(cmd='id')"), "unknown tool 'EvilTools'"),
    ("```python\nAgent.wait()", "unterminated"),
    ("```bash\nls\n```", "only python"),
    ("<think>never closed", "unterminated <think>"),
    ("", "empty output"),
]


@pytest.mark.parametrize("text,message", INVALID)
def test_invalid_outputs_say_why_in_one_line(text, message):
    parsed = parse_action(text, format="api_gui", screen=SCREEN)
    assert not parsed.valid
    assert message in parsed.error and "\n" not in parsed.error


def test_an_api_argument_is_checked_against_its_spec():
    spec = lookup_api("Agent", "switch_window")
    assert spec.bind(["Untitled 1"], {}) == {"title": "Untitled 1"}
    path = Param("path", "path", "a file")
    from verl_cua.actions.apis import check_value
    from verl_cua.actions.types import ActionError

    assert check_value("T.save_as", path, "~/Documents/a.xlsx") == "~/Documents/a.xlsx"
    for bad in ("/etc/passwd", "~/../../tmp/x", "~root/x", "a/../../b", "~/a\nb"):
        with pytest.raises(ActionError, match="home folder|may not contain"):
            check_value("T.save_as", path, bad)
    with pytest.raises(ActionError, match="cell reference"):
        check_value("T.set", Param("cell", "cell", ""), "B7; DROP")
    with pytest.raises(ActionError, match="at most"):
        check_value("T.set", Param("text", "str", ""), "x" * 5000)


def test_auto_tells_api_gui_from_pyautogui():
    assert parse_action(code("Agent.click(coordinates=[1, 2])"), format="auto", screen=SCREEN).format == "api_gui"
    assert parse_action(code("pyautogui.click(1, 2)"), format="auto", screen=SCREEN).format == "pyautogui"


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40), title=st.text(max_size=40))
def test_any_string_argument_reads_back_verbatim_and_never_escapes_its_call(text, title):
    """Hostile text (quotes, newlines, backticks, code) is one literal argument: rendering and parsing keep it as is."""
    for action in (A("type", text=text), A("api", api="Agent.switch_window", args={"title": title})):
        if action.kind == "type" and not text:
            continue
        if "\x00" in (action.text or title) or any(0xD800 <= ord(c) <= 0xDFFF for c in action.text or title):
            continue
        written = render_action([action], format="api_gui", screen=SCREEN)
        parsed = parse_action(written, format="api_gui", screen=SCREEN)
        assert parsed.valid, (written, parsed.error)
        assert [a.to_dict() for a in parsed.actions] == [action.to_dict()]


def test_the_prompt_lists_the_primitives_and_each_turn_the_focused_apps_apis():
    system = build_prompt("api_gui", screen=SCREEN).system
    assert "Agent.click(coordinates=[x, y]" in system and "Agent.open_app(app_name" in system
    text = turn_context("api_gui", {"focused_app": "libreoffice_calc", "api_result": "B7 = 99.5"})
    assert text.startswith("Focused app: libreoffice_calc.")
    assert text.endswith("Result of your last API call: B7 = 99.5")
    for spec in apis_for("libreoffice_calc"):
        assert (spec.tool == "Agent") != (spec.signature() in text)  # the app's APIs each turn, Agent's in the system
    assert turn_context("pyautogui", {"focused_app": "libreoffice_calc"}) is None
    assert "APIs you can call now" not in turn_context("api_gui", {})
