"""The grounding gap: 0 for any policy that never looks, positive for one that does, its bootstrap interval, and
an eval run's clicks read from its trajectories."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.eval.grounding import gap_interval, hit_matrix, own_cross, run_clicks, run_grounding, verdict

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


def _episode(root, task, seed, text_action, screen=(160, 210)):
    folder = root / task / f"seed-{seed}"
    folder.mkdir(parents=True)
    step = {"step": 1, "screen": list(screen), "valid": text_action is not None}
    step["action"] = {"actions": [] if text_action is None else [{"kind": text_action[0], "x": text_action[1],
                                                                   "y": text_action[2]}]}  # fmt: skip
    (folder / "trajectory.jsonl").write_text(json.dumps(step) + "\n")


def test_an_eval_runs_clicks_are_read_per_layout_in_task_area_pixels(tmp_path):
    _episode(tmp_path, "click-test", 3, ("click", 20, 60), screen=(320, 420))
    _episode(tmp_path, "click-test", 4, None)
    _episode(tmp_path, "click-test", 5, ("double_click", 1, 1))
    _episode(tmp_path, "click-test", 6, ("click", None, None))  # at the cursor: the task area's centre
    _episode(tmp_path, "click-button", 1, ("click", 1, 1))  # several targets: not a single-target task
    assert run_clicks(tmp_path) == {"click-test": {3: [(10.25, 30.25)], 4: [None], 5: [None], 6: [(80, 105)]}}


def test_an_eval_run_that_clicks_each_target_looks_and_one_that_clicks_one_point_does_not(tmp_path):
    boxes = {("click-test", s): (10.0 * s, 60.0, 10.0 * s + 10, 70.0) for s in range(12)}
    looking, blind = tmp_path / "looking", tmp_path / "blind"
    for s in range(12):
        _episode(looking, "click-test", s, ("click", 10 * s + 5, 65))
        _episode(blind, "click-test", s, ("click", 25, 65))  # inside layout 2's target only
    g = run_grounding(looking, dict(boxes))["click-test"]
    assert (g["own"], g["cross"], g["layouts"]) == (1.0, 0.0, 12) and verdict(g) == "looks"
    g = run_grounding(blind, dict(boxes))["click-test"]
    assert g["own"] == pytest.approx(1 / 12) and g["gap"] == pytest.approx(0) and verdict(g) == "learned prior"
    assert verdict({**g, "own": 0.0, "gap": 0.0, "gap_low": 0.0}) == "no success"
