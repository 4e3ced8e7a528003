"""hypothesis fuzzing: no input makes parse_action raise or hit its internal-error fallback."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verl_cua.actions import available_formats, parse_action

SCREEN = (1920, 1080)
FORMATS = available_formats()

SEEDS = [
    '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 300]}}\n'
    "</tool_call>",
    '<tool_call>{"name": "computer_use", "arguments": {"action": "key", "keys": ["ctrl", "c"]}}</tool_call>',
    "Thought: click it\nAction: click(start_box='<|box_start|>(161,91)<|box_end|>')",
    "Thought: t\nAction: drag(start_point='<point>1 2</point>', end_point='<point>3 4</point>')"
    "\n\ntype(content='a\\n')",
    "Thought: t\nAction: scroll(start_box='(5,5)', direction='down')",
    "Prose.\n```python\npyautogui.moveTo(1, 2)\npyautogui.dragTo(3, 4)\npyautogui.hotkey('ctrl', 's')\n```",
    "```python\npyautogui.keyDown('shift')\npyautogui.press('tab')\npyautogui.keyUp('shift')\n```",
    "DONE",
    json.dumps({"action": "scroll", "coordinate": [1, 2], "scroll_direction": "up", "scroll_amount": 3}),
    json.dumps(
        [
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "name": "computer", "input": {"action": "type", "text": "x"}},
        ]
    ),
]
ALPHABET = st.sampled_from(
    list("(){}[]<>'\"\\,:=+-._ \n\t0123456789abcxyz`")
    + [
        "<tool_call>",
        "</tool_call>",
        "Action: ",
        "pyautogui.",
        "```python\n",
        "```",
        '"action"',
        "start_box=",
        "<point>",
        "\x00",
        "\udcff",
        "é",
        "😀",
        "1e999",
        "NaN",
        "-1",
    ]
)


def _assert_well_behaved(text, fmt):
    result = parse_action(text, format=fmt, screen=SCREEN)
    assert isinstance(result.valid, bool)
    if not result.valid:
        assert result.error and "\n" not in result.error and result.actions == []
    assert result.error is None or "internal parser error" not in result.error
    for action in result.actions:  # every coordinate that comes back lies on the screen
        for v, limit in ((action.x, 1920), (action.x2, 1920), (action.y, 1080), (action.y2, 1080)):
            assert v is None or (isinstance(v, int) and 0 <= v < limit)
    if result.valid and result.code is None:
        result.to_pyautogui()
        result.to_computer13()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300), fmt=st.sampled_from(FORMATS))
def test_arbitrary_text_never_raises(text, fmt):
    _assert_well_behaved(text, fmt)


@settings(max_examples=400, deadline=None)
@given(
    seed=st.sampled_from(SEEDS),
    cut=st.integers(min_value=0, max_value=400),
    inserts=st.lists(st.tuples(st.integers(0, 400), st.lists(ALPHABET, max_size=4).map("".join)), max_size=4),
    fmt=st.sampled_from(FORMATS),
)
def test_truncated_and_mutated_real_outputs_never_raise(seed, cut, inserts, fmt):
    text = seed[:cut] if cut < len(seed) else seed
    for pos, piece in inserts:
        pos = min(pos, len(text))
        text = text[:pos] + piece + text[pos:]
    _assert_well_behaved(text, fmt)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), fmt=st.sampled_from(FORMATS))
def test_arbitrary_bytes_never_raise(data, fmt):
    result = parse_action(data, format=fmt, screen=SCREEN)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        assert not result.valid and "UTF-8" in result.error


def test_huge_garbage_and_deep_nesting_are_rejected_quickly():
    import time

    for fmt in FORMATS:
        for text in [
            "A" * (1 << 20),
            "(" * 100_000,
            "[" * 50_000,
            "```python\n" + "(" * 5000 + "\n```",
            '{"action": ' * 5000,
            "<tool_call>" + "[" * 20000 + "</tool_call>",
        ]:
            start = time.perf_counter()
            result = parse_action(text, format=fmt, screen=SCREEN)
            assert not result.valid and "internal parser error" not in result.error
            assert time.perf_counter() - start < 3.0
