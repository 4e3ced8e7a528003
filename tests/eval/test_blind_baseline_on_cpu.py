"""The blind baseline: the best single click point for a set of layouts, read from the pages' DOM in Chromium, and
the share of other layouts it hits."""

import numpy as np
import pytest

from verl_cua.eval.blind_baseline import blind_baseline, hit_rates, target_boxes


def test_hit_rates_count_pixel_centres_inside_boxes():
    rates = hit_rates([(0, 0, 2, 1), (1, 0, 3, 2)], size=(4, 3))
    assert rates.shape == (3, 4)
    assert rates[0].tolist() == [0.5, 1.0, 0.5, 0.0] and rates[1].tolist() == [0.0, 0.5, 0.5, 0.0]
    assert rates[2].sum() == 0


def test_click_test_boxes_and_the_best_blind_point(chromium):
    boxes = target_boxes("click-test", "84,116")
    for left, top, right, bottom in boxes:
        assert 0 <= left < right <= 160 and 50 <= top < bottom <= 210 and right - left >= 35  # the 160x160 task area
    blind = blind_baseline(("click-test",), "84,116", "0-19")
    x, y = blind["point"]
    assert blind["train_rate"] == 1.0  # the two buttons overlap, and the point lies in both
    assert all(left <= x + 0.5 < right and top <= y + 0.5 < bottom for left, top, right, bottom in boxes)
    held = np.array(target_boxes("click-test", "0-19"))
    inside = (held[:, 0] <= x + 0.5) & (x + 0.5 < held[:, 2]) & (held[:, 1] <= y + 0.5) & (y + 0.5 < held[:, 3])
    assert blind["heldout_rate"] == pytest.approx(inside.mean())
    assert 0 < blind["uniform_rate"] < 0.5 and blind["heldout_layouts"] == 20
