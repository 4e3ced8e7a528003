"""The reading warm start's data teaches syntax and copying, never a task: synthetic pages, random instructions, and an
answer that clicks a row drawn at random (its top-left corner, inside its box) or a random mark, parsed as the
trainer parses it. The control: the answers spread over the rows, so no fixed row (a task's button) is favoured."""

import random
from collections import Counter

import pytest

from verl_cua.actions import parse_action
from verl_cua.testing.reading import SCREEN, reading_example


def _rows(text: str) -> list[str]:
    return [row for row in text.splitlines()[2:] if not row.startswith("[cut at")]


@pytest.mark.parametrize("observation", ["screenshot_a11y_tree", "som"])
def test_every_answer_is_a_valid_click_inside_an_element_the_turn_shows(observation):
    rng = random.Random(7)
    chosen = Counter()
    for _ in range(300):
        instruction, shown, extra, answer = reading_example(rng, observation)
        assert shown.size == SCREEN and extra["observation"] == observation
        assert instruction not in ("Click the button.", "Focus into the textbox.")  # never a task's instruction
        parsed = parse_action(answer, format="pyautogui", screen=SCREEN, marks=extra.get("marks"))
        assert parsed.valid and [a.kind for a in parsed.actions] == ["click"], answer
        x, y = parsed.actions[0].x, parsed.actions[0].y
        rows = _rows(extra["elements_text"])
        hit = [i for i, e in enumerate(extra["elements"]) if e.box[0] <= x < e.box[0] + e.box[2]
               and e.box[1] <= y < e.box[1] + e.box[3]]  # fmt: skip
        assert hit, (answer, extra["elements_text"])
        if observation != "som":  # the click copies a row's position as the table writes it
            assert any(f"({x}, {y})" in row for row in rows)
        chosen[min(hit)] += 1
    assert len(chosen) >= 5 and max(chosen.values()) < 0.5 * sum(chosen.values())  # spread over the rows


def test_a_text_only_observation_has_no_reading_warm_start():
    from verl_cua.testing.reading import reading_model

    with pytest.raises(ValueError, match="screenshot_a11y_tree or som, not 'a11y_tree'"):
        reading_model(observation="a11y_tree")


def test_a_cut_table_s_answer_is_a_row_it_shows():
    """A table cut by its token budget: the answer copies one of the rows shown, never one cut off (the cut line is
    no row)."""
    rng, cut = random.Random(3), 0
    for _ in range(300):
        _, _, extra, answer = reading_example(rng, "screenshot_a11y_tree", budget=60)
        cut += "[cut at" in extra["elements_text"]
        x, y = (int(v) for v in answer.split("(")[1].split(")")[0].split(","))
        assert any(f"({x}, {y})" in row for row in _rows(extra["elements_text"])), (answer, extra["elements_text"])
    assert cut >= 30  # the budget did cut tables
