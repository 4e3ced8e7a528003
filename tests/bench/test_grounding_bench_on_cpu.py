"""The grounding gap (bench.grounding): 0 for any policy that never looks, positive for one that does, its
bootstrap interval, the swap's derangement, and the geometric scoring agreeing with the page in Chromium."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.grounding import area_click, derangement, gap_interval, hit_matrix, hits, own_cross

coord = st.floats(0, 160, allow_nan=False)
boxes_st = st.lists(
    st.tuples(coord, st.floats(50, 200), st.floats(5, 60), st.floats(5, 60)).map(
        lambda b: (b[0], b[1], b[0] + b[2], b[1] + b[3])
    ),
    min_size=2,
    max_size=12,
)
clicks_st = st.lists(st.one_of(st.none(), st.tuples(coord, st.floats(0, 210))), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(boxes=boxes_st, clicks=clicks_st)
def test_a_policy_that_clicks_the_same_everywhere_has_no_gap(boxes, clicks):
    g = gap_interval(hit_matrix([clicks] * len(boxes), boxes), resamples=50)
    assert g["gap"] == pytest.approx(0, abs=1e-12) and g["own"] == pytest.approx(g["cross"], abs=1e-12)
    assert g["gap_low"] == pytest.approx(0, abs=1e-12) and g["gap_high"] == pytest.approx(0, abs=1e-12)


def test_a_policy_that_clicks_each_target_has_a_positive_gap_whose_interval_excludes_zero():
    rng = np.random.default_rng(1)
    boxes = [(x, y, x + 30, y + 20) for x, y in zip(rng.uniform(0, 130, 40), rng.uniform(50, 190, 40), strict=True)]
    clicks = [[((b[0] + b[2]) / 2, (b[1] + b[3]) / 2)] * 3 for b in boxes]
    g = gap_interval(hit_matrix(clicks, boxes))
    assert g["own"] == 1.0 and 0 < g["cross"] < 0.3
    assert g["gap"] == pytest.approx(1 - g["cross"]) and 0 < g["gap_low"] <= g["gap"] <= g["gap_high"] <= 1


def test_own_and_cross_read_the_diagonal_and_the_pairs_of_distinct_layouts():
    h = np.array([[1.0, 0.5, 0.0], [0.0, 0.5, 1.0], [0.25, 0.25, 0.0]])
    assert own_cross(h) == pytest.approx((0.5, 2.0 / 6))
    # a resample that draws layout 0 twice: its pair with itself is neither own nor cross; each draw is one layout
    assert own_cross(h, np.array([0, 0, 1])) == pytest.approx((2.5 / 3, (0.5 + 0.5 + 0.0) / 3))
    assert own_cross(h, np.array([2, 2]))[1] != own_cross(h, np.array([2, 2]))[1]  # no other layout drawn: nan


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
    assert hits((5.0, 5.0), (5, 5, 6, 6)) and not hits((6.0, 5.0), (5, 5, 6, 6)) and not hits(None, (0, 0, 9, 9))


def test_geometric_scoring_agrees_with_the_page(chromium):
    """Clicks inside, outside and on the edges of the button, scored by the box and by Chromium's own reward."""
    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.task_sets import resolve_tasks
    from verl_cua.testing.miniwob_oracle import target_box

    env = MiniWoBEnv("click-test")
    disagree, total, hit = [], 0, 0
    try:
        for ref in resolve_tasks("miniwob", ["click-test"], "100000-100005"):
            env.reset(ref.task)
            left, top, right, bottom = target_box(env, "click-test")
            cx, cy = int((left + right) / 2), int((top + bottom) / 2)
            points = [(cx, cy), (int(left) - 2, cy), (int(right) + 1, cy), (cx, int(top) - 2), (cx, int(bottom) + 1)]
            points += [(int(left) + 1, cy), (int(right) - 2, cy), (5, 60)]
            for x, y in points:
                obs = env.reset(ref.task)
                text = f"pyautogui.click({x}, {y})"
                geometric = hits(area_click(text, obs.screen, env.scale), (left, top, right, bottom))
                page = env.step(text, format="pyautogui").reward > 0
                total, hit = total + 1, hit + page
                if geometric != page:
                    disagree.append((ref.task, x, y, geometric, page))
    finally:
        env.close()
    assert not disagree and 0 < hit < total
