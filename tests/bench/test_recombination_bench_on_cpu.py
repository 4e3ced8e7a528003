"""bench.recombination: the position-by-position product of a policy's outputs, which clicks no target holds, and the
bench itself at its smallest (a tiny model, the two layouts)."""

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.recombination import foreign_rate, hit_rate, positional_product

SCREEN = (160, 210)


@given(texts=st.lists(st.text(max_size=12), min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_each_character_comes_from_its_position_across_the_texts(texts, seed):
    for out in positional_product(texts, 20, random.Random(seed)):
        assert all(any(i < len(t) and t[i] == c for t in texts) for i, c in enumerate(out))
        assert any(len(t) <= len(out) for t in texts)  # it stops only where some text has ended


def test_identical_texts_stay_whole_and_two_texts_recombine_into_all_four():
    assert set(positional_product(["click(81, 104)"] * 3, 50, random.Random(0))) == {"click(81, 104)"}
    drawn = set(positional_product(["(81, 87)", "(81, 10)"], 400, random.Random(0)))
    assert drawn == {"(81, 87)", "(81, 10)", "(81, 17)", "(81, 80)"}  # two clicks nobody made
    # a 2-digit and a 3-digit y (two hits on one button): the mix cuts numbers short and lengthens them
    drawn = set(positional_product(["(81, 87)", "(81, 104)"], 400, random.Random(0)))
    assert {"(81, 17)", "(81, 10)", "(81, 174)", "(81, 874)"} <= drawn and {"(81, 87)", "(81, 104)"} <= drawn
    with pytest.raises(ValueError, match="no texts"):
        positional_product([], 1, random.Random(0))


def test_hits_and_foreign_clicks_on_two_boxes():
    boxes = [(18, 52, 117, 151), (22, 59, 120, 157)]
    texts = ["pyautogui.click(81, 100)", "pyautogui.click(81, 170)", "pyautogui.click(20, 55)", "not a click"]
    assert hit_rate(texts, boxes[0], SCREEN, 1) == 0.5  # (81, 100) and (20, 55)
    assert hit_rate(texts, boxes[1], SCREEN, 1) == 0.25  # (20, 55) is left of and above the second box
    assert foreign_rate(texts, boxes, SCREEN, 1) == 0.5  # (81, 170) is under both; an invalid output hits nothing


def test_the_bench_samples_a_policy_on_real_layouts(chromium, tmp_path):
    """`python -m bench.recombination` at its smallest: a tiny model's samples on the learning test's two layouts,
    scored and recombined position by position; per-layout figures, their means and the ratio hold together."""
    from bench.recombination import main
    from verl_cua.testing.tiny_models import build_tiny_model

    out = tmp_path / "recombination.json"
    assert main(["--model", str(build_tiny_model("qwen25vl")), "--samples", "4", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert len(r["layouts"]) == 2 and r["samples"] == 4
    for key in ("actual", "foreign", "positional"):
        assert r[key] == pytest.approx(sum(p[key] for p in r["layouts"]) / 2) and 0.0 <= r[key] <= 1.0
    assert all(sum(n for _, n in p["top"]) == 4 for p in r["layouts"])  # every sample counted once
    assert r["ratio"] == (pytest.approx(r["positional"] / r["actual"]) if r["actual"] else None)
