"""Set-of-marks points: every format names a mark its own way (`tag_3`, OSWorld's SoM name), the parser resolves it
to the centre the observation gave, and a mark that is not on the screen, or a screen without marks, is an invalid
action in one line. Model text stays hostile: a mark name is never evaluated and never becomes text or an API
argument."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.actions import parse_action
from verl_cua.actions.formats import FORMAT_REGISTRY, get_format
from verl_cua.actions.prompts import OBSERVATION_GUIDES, build_prompt

SCREEN = (160, 210)
MARKS = {1: (12, 20), 2: (57, 61), 3: (101, 150)}
IMAGES = {"qwen25vl": (168, 224), "qwen3vl": (160, 224), "uitars": (168, 224)}


def _parse(text: str, fmt: str, marks=MARKS):
    return parse_action(text, format=fmt, screen=SCREEN, image=IMAGES.get(fmt), marks=marks)


def _with_number(fmt: str, n: int) -> str:
    example = get_format(fmt).mark_example.replace("tag_3", f"tag_{n}")
    if fmt == "pyautogui" or fmt == "api_gui":
        return f"```python\n{example}\n```"
    if fmt in ("qwen25vl", "qwen3vl"):
        return f'<tool_call>\n{{"name": "computer_use", "arguments": {example}}}\n</tool_call>'
    if fmt == "uitars":
        return f"Thought: the mark.\nAction: {example}"
    return example


@pytest.mark.parametrize("fmt", sorted(FORMAT_REGISTRY))
def test_each_format_s_example_lands_on_the_mark_s_centre(fmt):
    assert "tag_3" in get_format(fmt).mark_example  # every built-in format documents its way
    parsed = _parse(_with_number(fmt, 3), fmt)
    assert parsed.valid, parsed.error
    assert [(a.kind, a.x, a.y) for a in parsed.actions] == [("click", *MARKS[3])]
    control = _parse(_with_number(fmt, 2), fmt)  # another mark: another point (the number is read, not assumed)
    assert (control.actions[0].x, control.actions[0].y) == MARKS[2]


@pytest.mark.parametrize("fmt", sorted(FORMAT_REGISTRY))
def test_a_mark_not_on_the_screen_or_a_screen_without_marks_is_one_invalid_line(fmt):
    missing = _parse(_with_number(fmt, 7), fmt)
    assert not missing.valid and "tag_7 is not a mark on this screen (its marks: tag_1 to tag_3)" in missing.error
    unmarked = _parse(_with_number(fmt, 3), fmt, marks=None)
    assert not unmarked.valid and "this screen shows no marks" in unmarked.error and "\n" not in unmarked.error


@pytest.mark.parametrize(
    "code, reason",
    [
        ("pyautogui.click(tag_2, 40)", "takes a mark alone"),
        ("pyautogui.click(10, y=tag_2)", "takes a mark alone"),
        ("pyautogui.write(tag_2)", "needs a string"),
        ("pyautogui.press(tag_2)", "key must be a non-empty string"),
        ("pyautogui.click(tag_2.x)", "not allowed"),
        ("pyautogui.click(tag_12345)", "not allowed"),  # at most 4 digits: no huge numbers through a name
        ("pyautogui.click(tag_)", "not allowed"),
        ("pyautogui.click(Tag_2)", "not allowed"),
        ("tag_2 = (0, 0)\npyautogui.click(tag_2)", "assignment"),
        ("pyautogui.click(*tag_2)", "not allowed"),
    ],
)
def test_pyautogui_takes_a_mark_only_as_a_whole_point(code, reason):
    parsed = _parse(f"```python\n{code}\n```", "pyautogui")
    assert not parsed.valid and reason in parsed.error, parsed.error


def test_the_code_formats_resolve_marks_in_every_pointer_call():
    parsed = _parse("```python\npyautogui.moveTo(tag_1)\npyautogui.dragTo(tag_3)\npyautogui.rightClick(x=tag_2)\n```",
                    "pyautogui")  # fmt: skip
    assert [(a.kind, a.x, a.y, a.x2, a.y2) for a in parsed.actions] == [
        ("drag", *MARKS[1], *MARKS[3]),
        ("right_click", *MARKS[2], None, None),
    ]
    drag = _parse("```python\nAgent.drag_and_drop(drag_from_coordinates=tag_1, drop_on_coordinates=tag_2)\n```",
                  "api_gui")  # fmt: skip
    assert [(a.x, a.y, a.x2, a.y2) for a in drag.actions] == [(*MARKS[1], *MARKS[2])]
    api = _parse("```python\nCalcTools.set_cell_value(tag_2, 'x')\n```", "api_gui")  # a mark is no API value
    assert not api.valid


def test_a_mark_is_screen_pixels_whatever_the_format_s_coordinate_range():
    """Qwen-VL's coordinates are the resized image's, UI-TARS' too: a mark skips that scaling (its centre is the
    screen's pixel), where the same numbers written as coordinates are scaled."""
    call = '{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": %s}}'
    tool = f"<tool_call>\n{call}\n</tool_call>"
    marked = _parse(tool % '"tag_3"', "qwen25vl")
    literal = _parse(tool % "[101, 150]", "qwen25vl")
    assert (marked.actions[0].x, marked.actions[0].y) == MARKS[3] != (literal.actions[0].x, literal.actions[0].y)


@pytest.mark.parametrize("fmt", sorted(FORMAT_REGISTRY))
def test_the_system_prompt_explains_the_observation_and_the_format_s_mark_syntax(fmt):
    som = build_prompt(fmt, screen=SCREEN, image=IMAGES.get(fmt), observation="som").system
    plain = build_prompt(fmt, screen=SCREEN, image=IMAGES.get(fmt)).system
    assert som.startswith(plain) and get_format(fmt).mark_example in som and "tag_N" in som
    for observation, guide in OBSERVATION_GUIDES.items():
        text = build_prompt(fmt, screen=SCREEN, image=IMAGES.get(fmt), observation=observation).system
        assert (text == plain) == (observation == "screenshot") and guide.split(".")[0] in text
    with pytest.raises(ValueError, match="unknown observation 'tree'; valid: screenshot, a11y_tree"):
        build_prompt(fmt, screen=SCREEN, observation="tree")


@pytest.mark.parametrize("marks", [{0: (1, 1)}, {1: (1,)}, {True: (1, 1)}, [(1, 1)], {1: ("1", 2)}])
def test_bad_marks_from_a_caller_raise_one_line(marks):
    with pytest.raises(ValueError, match="mark"):
        _parse("```python\npyautogui.click(tag_1)\n```", "pyautogui", marks=marks)


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.sampled_from(sorted(FORMAT_REGISTRY)),
    n=st.integers(min_value=0, max_value=12000),
    marks=st.dictionaries(st.integers(1, 40), st.tuples(st.integers(-50, 400), st.integers(-50, 400)), max_size=8),
)
def test_fuzz_any_mark_number_lands_on_its_centre_on_the_screen_or_is_invalid(fmt, n, marks):
    parsed = _parse(_with_number(fmt, n), fmt, marks=marks)
    if n in marks:
        x, y = marks[n]
        clamped = (min(max(x, 0), SCREEN[0] - 1), min(max(y, 0), SCREEN[1] - 1))
        assert parsed.valid and (parsed.actions[0].x, parsed.actions[0].y) == clamped
    else:
        assert not parsed.valid and parsed.error and "\n" not in parsed.error


@settings(max_examples=400, deadline=None)
@given(
    fmt=st.sampled_from(sorted(FORMAT_REGISTRY)),
    noise=st.text(alphabet=st.sampled_from(list("tag_0123456789(),'\"[]{}: =.*xy\n")), max_size=60),
)
def test_fuzz_mark_shaped_noise_never_raises_and_stays_on_the_screen(fmt, noise):
    for text in (noise, _with_number(fmt, 1).replace("tag_1", noise)):
        parsed = _parse(text, fmt)
        assert parsed.valid or (parsed.error and "\n" not in parsed.error)
        for a in parsed.actions:
            for v, side in ((a.x, 0), (a.y, 1), (a.x2, 0), (a.y2, 1)):
                assert v is None or 0 <= v < SCREEN[side]
