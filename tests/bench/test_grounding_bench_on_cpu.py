"""bench.grounding: the swap's derangement, a model output's click in task-area pixels, the geometric scoring
agreeing with the page in Chromium, and the bench itself at its smallest (a tiny model, two layouts)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.grounding import area_click, derangement
from verl_cua.eval.grounding import hits


@given(n=st.integers(2, 300), seed=st.integers(0, 2**16))
def test_the_swap_gives_every_layout_another_layouts_screenshot(n, seed):
    perm = derangement(n, seed)
    assert sorted(perm) == list(range(n)) and all(i != j for i, j in enumerate(perm))


@given(text=st.text(max_size=80))
def test_area_click_takes_only_a_single_click_and_never_raises(text):
    click = area_click(text, (160, 210), 1)
    assert click is None or (0 <= click[0] <= 161 and 0 <= click[1] <= 211)


def test_area_click_maps_screen_pixels_to_the_task_area():
    assert area_click("pyautogui.click(10, 20)", (320, 420), 2) == (5.25, 10.25)
    assert area_click("pyautogui.click(1, 2)\npyautogui.click(3, 4)", (160, 210), 1) is None  # two clicks
    assert area_click("pyautogui.doubleClick(10, 20)", (160, 210), 1) is None
    assert area_click("pyautogui.click()", (320, 420), 2) == (80, 105)  # where a fresh episode's cursor is
    assert hits((5.0, 5.0), (5, 5, 6, 6)) and not hits((6.0, 5.0), (5, 5, 6, 6)) and not hits(None, (0, 0, 9, 9))


def test_geometric_scoring_agrees_with_the_page(chromium):
    """Clicks inside, outside and on the edges of the button, scored by the box and by Chromium's own reward."""
    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.miniwob_targets import target_box
    from verl_cua.envs.task_sets import resolve_tasks

    env = MiniWoBEnv("click-test")
    disagree, total, hit = [], 0, 0
    try:
        for ref in resolve_tasks("miniwob", ["click-test"], "100000-100003"):
            env.reset(ref.task)
            left, top, right, bottom = target_box(env, "click-test")
            cx, cy = int((left + right) / 2), int((top + bottom) / 2)
            points = [(cx, cy), (int(left) - 2, cy), (int(right) + 1, cy), (cx, int(top) - 2), (cx, int(bottom) + 1)]
            points += [(int(left) + 1, cy), (int(right) - 2, cy), (5, 60), None]
            for point in points:
                obs = env.reset(ref.task)
                text = "pyautogui.click()" if point is None else f"pyautogui.click({point[0]}, {point[1]})"
                geometric = hits(area_click(text, obs.screen, env.scale), (left, top, right, bottom))
                page = env.step(text, format="pyautogui").reward > 0
                total, hit = total + 1, hit + page
                if geometric != page:
                    disagree.append((ref.task, point, geometric, page))
    finally:
        env.close()
    assert not disagree and 0 < hit < total


def test_the_bench_samples_a_policy_on_real_layouts_and_reports_its_gap(chromium, tmp_path, capsys):
    """`python -m bench.grounding` at its smallest: a tiny model's sampled clicks on two held-out layouts, each with its
    own screenshot and a swapped one; the figures hold together (own - cross, own - swap) and are written."""
    from bench.grounding import main
    from verl_cua.testing.tiny_models import build_tiny_model

    out = tmp_path / "grounding.json"
    model = str(build_tiny_model("qwen25vl"))
    assert main(["--model", model, "--seeds", "100000-100001", "--samples", "2", "--out", str(out)]) == 0
    g = json.loads(out.read_text())
    assert (g["model"], g["layouts"], g["samples"]) == (model, 2, 2)
    assert all(0.0 <= g[k] <= 1.0 for k in ("own", "cross", "swap"))
    assert g["gap"] == pytest.approx(g["own"] - g["cross"]) and g["swap_drop"] == pytest.approx(g["own"] - g["swap"])
    assert g["gap_low"] <= g["gap"] <= g["gap_high"]
    assert "2 click-test layouts x 2 clicks" in capsys.readouterr().out


def test_a_mark_is_played_on_the_layout_it_is_scored_on():
    """With set-of-marks a policy that names the same mark on every layout is blind, though its points differ per
    layout: resolved on the scored layout, its gap is 0; the control, a policy that names each layout's target mark,
    has own 1 and cross below it."""
    from types import SimpleNamespace

    from bench.grounding import text_hit_matrix
    from verl_cua.eval.grounding import gap_interval

    marks = [{1: (10, 10), 2: (50, 50)}, {1: (50, 50), 2: (10, 10)}, {1: (10, 10), 2: (50, 50)}]
    pages = [SimpleNamespace(screen=(160, 210), extra={"marks": m}) for m in marks]
    boxes = [(40, 40, 60, 60), (40, 40, 60, 60), (0, 0, 20, 20)]  # the target's mark: 2, 1, 1
    blind = text_hit_matrix([["pyautogui.click(tag_2)"]] * 3, pages, boxes, 1)
    assert gap_interval(blind, resamples=10)["gap"] == pytest.approx(0)
    reading = text_hit_matrix([["pyautogui.click(tag_2)"], ["pyautogui.click(tag_1)"], ["pyautogui.click(tag_1)"]],
                              pages, boxes, 1)  # fmt: skip
    g = gap_interval(reading, resamples=10)
    assert g["own"] == 1.0 and g["cross"] < 0.5
