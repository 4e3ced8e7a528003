"""CoSo's causal weights (verl_cua.algos.coso): which tokens of a parsed output cause its action, the paper's
normalisation, and the weighted-entropy term; fuzzed on random token splits of random outputs."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.algos.coso import (
    INVALID,
    action_parser,
    causal_weights,
    coso_metrics,
    normalize_weights,
    raw_causal_weights,
    token_pieces,
    weighted_entropy,
)

SCREEN = (160, 210)
PARSE = action_parser("pyautogui", screen=SCREEN, image=SCREEN)
CLICK = ["```", "python", "\n", "py", "autogui", ".click", "(", "50", ",", " ", "60", ")", "\n", "```", "\n", "  "]


def test_the_coordinate_tokens_carry_weight_and_trailing_whitespace_none():
    raw = raw_causal_weights(CLICK, PARSE, window=1)
    assert raw[CLICK.index("50")] == 1.0 and raw[CLICK.index("60")] == 1.0  # a masked coordinate changes the click
    assert raw[-1] == 0.0 and raw[-2] == 0.0  # the trailing newline and spaces change nothing
    assert raw[CLICK.index(" ")] == 0.0  # whitespace-only token: 0 whatever its window does
    weights = causal_weights(CLICK, PARSE, window=4)
    assert len(weights) == len(CLICK) and all(0.0 <= w <= 1.0 for w in weights)
    assert weights[CLICK.index("50")] == 1.0 and weights[-1] == 0.0


def test_the_window_reaches_the_tokens_before_a_cause():
    # with w=4 the window that starts at "(" covers "50": "(" is credited with the coordinate's effect
    assert raw_causal_weights(CLICK, PARSE, window=4)[CLICK.index("(")] == 1.0


def test_a_named_mark_is_parsed_against_the_marks_shown():
    """Under set-of-marks a `tag_N` reply is an action whose mark number carries the weight; the control, the same
    reply parsed without marks, is invalid and has no causal token."""
    pieces = ["py", "autogui", ".click", "(", "tag", "_", "2", ")"]
    marked = raw_causal_weights(pieces, action_parser("pyautogui", SCREEN, SCREEN, marks={1: (5, 5), 2: (50, 60)}), 1)
    assert marked[pieces.index("2")] == 1.0
    blind = action_parser("pyautogui", SCREEN, SCREEN)
    assert blind("".join(pieces)) == INVALID and not any(raw_causal_weights(pieces, blind, 1))


def test_an_invalid_output_has_no_causal_token():
    pieces = ["I", " think", " I", " should", " click", " the", " button"]
    assert PARSE("".join(pieces)) == INVALID
    assert causal_weights(pieces, PARSE) == [0.0] * len(pieces)


def test_a_thought_is_not_causal_but_the_action_is():
    pieces = ["The", " button", " is", " left", ".", "\n", "```", "python", "\n", "pyautogui", ".click", "(", "50"]
    pieces += [",", " 60", ")", "\n", "```"]
    raw = raw_causal_weights(pieces, PARSE, window=4)
    assert raw[:3] == [0.0, 0.0, 0.0]  # masking the thought's words leaves the click as it is
    assert raw[pieces.index("50")] == 1.0


def test_normalisation_min_max_then_sqrt_and_ties():
    assert normalize_weights([0.0, 1.0, 0.25]) == [0.0, 1.0, 0.5]
    assert normalize_weights([2.0, 4.0, 3.0]) == [0.0, 1.0, math.sqrt(0.5)]
    assert normalize_weights([0.0, 0.0]) == [0.0, 0.0]  # 0/0: nothing causal stays nothing
    assert normalize_weights([1.0, 1.0, 1.0]) == [1.0, 1.0, 1.0]  # 0/0: every token causal stays causal
    assert normalize_weights([]) == []
    assert normalize_weights([float("nan"), 1.0]) == [0.0, 1.0]


def test_token_pieces_rebuild_the_text_and_hold_back_split_characters():
    table = {1: "ab", 2: " c", 3: b"\xc3", 4: b"\xa9", 5: "d"}

    def decode(ids):
        raw = b"".join(table[i] if isinstance(table[i], bytes) else table[i].encode() for i in ids)
        return raw.decode("utf-8", errors="replace")

    pieces = token_pieces([1, 2, 3, 4, 5], decode)
    assert pieces == ["ab", " c", "", "\u00e9", "d"]
    assert "".join(pieces) == decode([1, 2, 3, 4, 5])


def test_weighted_entropy_and_metrics():
    entropy = torch.tensor([[1.0, 2.0, 3.0, 4.0]], requires_grad=True)
    weights = torch.tensor([[1.0, 0.5, 0.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    term = weighted_entropy(entropy, weights, mask)
    assert term.tolist() == [[1.0, 1.0, 0.0, 0.0]]
    term.sum().backward()
    assert entropy.grad.tolist() == [[1.0, 0.5, 0.0, 0.0]]  # the bonus pushes only the weighted model tokens
    m = coso_metrics(entropy, weights, mask)
    assert m["coso/weight_mean"] == pytest.approx(0.5)
    assert m["coso/weighted_entropy"] == pytest.approx(2.0 / 3)
    assert m["coso/causal_fraction"] == pytest.approx(2 / 3)
    assert coso_metrics(entropy, weights, torch.zeros_like(mask)) == {}


ACTIONS = st.sampled_from(
    [
        "pyautogui.click(50, 60)",
        "```python\npyautogui.typewrite('hello')\n```",
        "pyautogui.hotkey('ctrl', 'c')",
        "Thought: go.\npyautogui.doubleClick(x=3, y=200)",
        "DONE",
        "FAIL",
        "WAIT",
    ]
)
OUTPUTS = st.one_of(ACTIONS, st.text(max_size=60), st.builds(lambda a, t: a + t, ACTIONS, st.text(max_size=10)))


@settings(max_examples=150, deadline=None)
@given(text=OUTPUTS, cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=20), window=st.integers(1, 6))
def test_fuzz_weights_on_random_token_splits(text, cuts, window):
    points = sorted({0, len(text), *[c for c in cuts if c < len(text)]})
    pieces = [text[a:b] for a, b in zip(points, points[1:], strict=False)] or [""]
    for fmt in ("pyautogui", "qwen25vl", "uitars"):
        weights = causal_weights(pieces, action_parser(fmt, screen=SCREEN, image=SCREEN), window=window)
        assert len(weights) == len(pieces)
        assert all(0.0 <= w <= 1.0 for w in weights)
        assert all(w == 0.0 for w, p in zip(weights, pieces, strict=True) if not p.strip())
