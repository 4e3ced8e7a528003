"""pyautogui: OSWorld-style outputs (prose + ```python block, or WAIT/DONE/FAIL) -> screen actions."""

import pytest

from verl_cua.actions import GUIAction as A
from verl_cua.actions import parse_action

SCREEN = (1920, 1080)


def code(body: str, prose: str = "") -> str:
    return f"{prose}\n```python\n{body}\n```\n" if prose else f"```python\n{body}\n```"


VALID = [
    (code("pyautogui.click(100, 200)"), [A("click", x=100, y=200)]),
    (code("pyautogui.click(x=100, y=200, button='right')"), [A("right_click", x=100, y=200)]),
    (code("pyautogui.click(100, 200, clicks=2)"), [A("double_click", x=100, y=200)]),
    (code("pyautogui.click((640, 360))"), [A("click", x=640, y=360)]),
    (code("pyautogui.doubleClick(300, 400)"), [A("double_click", x=300, y=400)]),
    (code("pyautogui.tripleClick(10, 10)"), [A("triple_click", x=10, y=10)]),
    (
        code("pyautogui.rightClick(5, 5)\npyautogui.middleClick(7, 8)"),
        [A("right_click", x=5, y=5), A("middle_click", x=7, y=8)],
    ),
    (
        code("pyautogui.moveTo(500, 500)\npyautogui.dragTo(600, 650, duration=0.5)"),
        [A("drag", x=500, y=500, x2=600, y2=650)],
    ),
    (
        code("pyautogui.moveTo(10, 10)\npyautogui.mouseDown()\npyautogui.moveTo(300, 10)\npyautogui.mouseUp()"),
        [A("drag", x=10, y=10, x2=300, y2=10)],
    ),
    (code("pyautogui.scroll(-3)"), [A("scroll", dy=-3)]),
    (code("pyautogui.scroll(5, x=100, y=100)"), [A("scroll", x=100, y=100, dy=5)]),
    (code("pyautogui.hscroll(2)"), [A("scroll", dx=2)]),
    (code("pyautogui.write('hello')"), [A("type", text="hello")]),
    (code("pyautogui.typewrite('Total: 42\\n', interval=0.05)"), [A("type", text="Total: 42\n")]),
    (code("pyautogui.press('enter')"), [A("key", keys=["enter"])]),
    (code("pyautogui.press(['tab', 'tab'])"), [A("key", keys=["tab"]), A("key", keys=["tab"])]),
    (code("pyautogui.press('down', presses=3)"), [A("key", keys=["down"])] * 3),
    (code("pyautogui.hotkey('ctrl', 'a')"), [A("key", keys=["ctrl", "a"])]),
    (code("pyautogui.hotkey('Ctrl', 'Shift', 'T')"), [A("key", keys=["ctrl", "shift", "t"])]),
    (
        code("pyautogui.keyDown('shift')\npyautogui.press('tab')\npyautogui.keyUp('shift')"),
        [A("key", keys=["shift", "tab"])],
    ),
    (
        code("pyautogui.keyDown('ctrl')\npyautogui.keyDown('c')\npyautogui.keyUp('c')\npyautogui.keyUp('ctrl')"),
        [A("key", keys=["ctrl", "c"])],
    ),
    (
        code("import pyautogui\nimport time\npyautogui.click(1, 2)\ntime.sleep(0.5)\npyautogui.write('x')"),
        [A("click", x=1, y=2), A("wait"), A("type", text="x")],
    ),
    (code("import pyautogui as pg\npg.FAILSAFE = False\npg.click(10, 20)"), [A("click", x=10, y=20)]),
    ("pyautogui.click(1, 2)", [A("click", x=1, y=2)]),
    ("WAIT", [A("wait")]),
    ("DONE", [A("done")]),
    ("FAIL", [A("fail")]),
    ("```\nDONE\n```", [A("done")]),
    ("The document is saved, so the task is complete.\nDONE", [A("done")]),
    (code("pyautogui.click(100 + 20, 200 - 10)"), [A("click", x=120, y=190)]),
    (code("pyautogui.moveTo(100, 100)\npyautogui.click()"), [A("move", x=100, y=100), A("click")]),
    (code("pyautogui.write('a')") + "\n```DONE```", [A("type", text="a"), A("done")]),
    (code("pyautogui.click(1, 2)\nDONE"), [A("click", x=1, y=2), A("done")]),
    (code("pyautogui.click(1, 2)") + "\nDONE", [A("click", x=1, y=2), A("done")]),
    ("```python pyautogui.click(3, 4)```", [A("click", x=3, y=4)]),
    ("```pyautogui.click(3, 4)```", [A("click", x=3, y=4)]),
    (code("pyautogui.press('A')"), [A("type", text="A")]),
    (
        code("pyautogui.keyDown('shift')\npyautogui.keyDown('a')\npyautogui.keyUp('shift')\npyautogui.keyUp('a')"),
        [A("key", keys=["shift", "a"])],
    ),
]


@pytest.mark.parametrize("text,expected", VALID)
def test_valid_outputs_parse_to_screen_actions(text, expected):
    result = parse_action(text, format="pyautogui", screen=SCREEN)
    assert result.valid, result.error
    assert result.actions == expected


def test_prose_around_the_block_is_the_thought():
    result = parse_action(
        code("pyautogui.click(1, 1)", prose="The OK button is top left."), format="pyautogui", screen=SCREEN
    )
    assert result.thought == "The OK button is top left."


def test_off_screen_click_is_clamped_and_reported():
    result = parse_action(code("pyautogui.click(5000, 100)"), format="pyautogui", screen=SCREEN)
    assert result.valid and result.actions == [A("click", x=1919, y=100)]
    assert "clamped" in result.error


INVALID = [
    ("Let me think about what to click next.", "no ```python"),
    ("```python\npyautogui.click(1, 2)\n", "unterminated"),
    ("```bash\nrm -rf ~\n```", "'bash'"),
    (code("pyautogui.click('button.png')"), "numeric coordinates"),
    (code("pyautogui.click(1, 2, clicks=5)"), "5 clicks"),
    (code("pyautogui.moveRel(10, 10)"), "pyautogui.moveRel() is not an allowed call"),
    (code("pyautogui.mouseDown()\npyautogui.moveTo(5, 5)"), "mouseDown() without mouseUp()"),
    (code("pyautogui.keyDown('shift')\npyautogui.click(1, 1)"), "while holding shift"),
    (code("pyautogui.keyDown('shift')"), "without keyUp"),
    (code("pyautogui.press('f99')"), "unknown key"),
    (code("pyautogui.press('a', presses=1000)"), "at most 50"),
    (code("pyautogui.click(1, 2, foo=3)"), "unexpected argument 'foo'"),
    (code("pyautogui.click(1, 2"), "not valid Python"),
    (code("pyautogui.scroll('down')"), "needs a number"),
    (code("pyautogui.scroll(0)"), "scroll by 0"),
    (code("pyautogui.mouseDown(1, 1, button='right')\npyautogui.mouseUp(9, 9, button='right')"), "non-left button"),
    (code("pyautogui.click(1, 1, button=['left'])"), "unknown mouse button"),
    (code("pyautogui.press('sleep')"), "suspends the machine"),
    (code("pyautogui.click(" + "1" * 400 + ", 1)"), "out of bounds"),
]


@pytest.mark.parametrize("text,reason", INVALID)
def test_malformed_outputs_are_invalid_with_a_reason(text, reason):
    result = parse_action(text, format="pyautogui", screen=SCREEN)
    assert not result.valid
    assert reason in result.error, result.error
