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


def test_conditioned_on_the_instruction_each_text_gets_its_own_point():
    """Two instructions whose targets sit apart: one point per text hits both; the overall best point hits one,
    and a held-out text never trained on falls back to it."""
    from verl_cua.eval.blind_baseline import by_instruction

    train = [("left", (0, 0, 10, 10))] * 3 + [("right", (100, 100, 110, 110))] * 2
    heldout = [("left", (0, 0, 10, 10)), ("right", (100, 100, 110, 110)), ("new", (100, 100, 110, 110))]
    fitted = by_instruction(train, heldout, fallback=(5, 5))
    assert fitted["heldout_rate"] == pytest.approx(2 / 3) and fitted["instructions"] == 2
    assert fitted["heldout_seen"] == pytest.approx(2 / 3)


def test_a_multi_click_task_s_baseline_is_the_best_fixed_sequence():
    """click-button-sequence's blind bar: fixed clicks for ONE then TWO; a sequence solves a layout only when every
    click hits its target in order (the control: the right points in the wrong order solve nothing)."""
    from verl_cua.eval.blind_baseline import sequence_baseline

    one, two = (0, 0, 10, 10), (50, 50, 60, 60)
    train = [[one, two]] * 4 + [[two, one]]
    fitted = sequence_baseline(train, [[one, two], [two, one]])
    assert fitted["train_rate"] == pytest.approx(4 / 5) and fitted["heldout_rate"] == pytest.approx(1 / 2)
    first, second = fitted["points"]
    assert one[0] <= first[0] < one[2] and two[0] <= second[0] < two[2]


def test_click_button_s_target_is_the_button_the_instruction_quotes(chromium):
    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.miniwob_targets import dom_elements, target_boxes

    env = MiniWoBEnv("click-button")
    try:
        obs = env.reset({"task": "click-button", "seed": 1})
        (box,) = target_boxes(env, "click-button")
        (button,) = [e for e in dom_elements(env) if e["tag"] == "BUTTON" and e["left"] == box[0]]
        assert f'"{button["text"].strip()}"' in obs.instruction
    finally:
        env.close()
