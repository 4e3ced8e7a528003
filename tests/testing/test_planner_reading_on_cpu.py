"""The planner reading warm start's data teaches a thought's syntax and copying, never a task: every planner answer
names a row the turn's table shows, which the grounding stand-in then clicks; the instructions are random words
without quotes; the named rows spread over the table (no fixed row, a task's button, is favoured)."""

import random
from collections import Counter

import pytest

from verl_cua.testing.grounding_standin import choose_action, named_element, planner_thought
from verl_cua.testing.planner_reading import element_name, planner_example, planner_model, thought_text
from verl_cua.testing.reading import SCREEN


def test_every_answer_names_a_shown_row_and_the_standin_clicks_an_element_of_that_name():
    rng = random.Random(3)
    positions = Counter()
    for _ in range(300):
        instruction, shown, extra, element = planner_example(rng, "screenshot_a11y_tree")
        assert shown.size == SCREEN and not set("'\"") & set(instruction)  # no quote to copy a name from
        name = element_name(element)
        assert name and name in extra["elements_text"]
        thought = planner_thought([{"role": "assistant", "content": thought_text(name)}])
        action = choose_action(thought, extra["elements"])
        clicked = named_element(thought, extra["elements"])
        assert action.kind == "click" and element_name(clicked).casefold() == name.casefold()
        x, y, w, h = clicked.box
        assert (action.x, action.y) == (x + w // 2, y + h // 2)
        positions[extra["elements"].index(element)] += 1
    assert len(positions) >= 5 and max(positions.values()) < 0.5 * sum(positions.values())


def test_the_answer_splits_into_the_thought_the_executor_gets():
    assert planner_thought([{"role": "assistant", "content": thought_text("OK")}]) == 'click "OK"'


def test_only_element_tables_are_read():
    with pytest.raises(ValueError, match="screenshot_a11y_tree"):
        planner_model(observation="som")


def test_a_cut_table_names_only_rows_it_still_shows():
    from verl_cua.envs.observation import element_rows

    rng, cut = random.Random(5), 0
    for _ in range(200):
        _, _, extra, element = planner_example(rng, "screenshot_a11y_tree", budget=40)
        shown = element_rows(extra["elements_text"])
        cut += len(shown) < len(extra["elements"])
        assert extra["elements"].index(element) < len(shown)  # a row the table shows, never one cut off
    assert cut > 20  # the budget did cut tables, so the check above was exercised
