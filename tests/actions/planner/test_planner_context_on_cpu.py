"""CODA's planner and executor contexts: the history keeps 15 steps and 2 screenshots (the current one last), the
last user turn carries the task, a reply splits into thought and answer by its Action part only, and the executor gets
its own prompt first and the planner's thought as an open assistant turn."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.actions.planner import (
    CODA,
    PLANNER_SPECS,
    Plan,
    PlannerSpec,
    PlanStep,
    executor_messages,
    get_planner_spec,
    planner_messages,
    register_planner_spec,
    split_plan,
)

TASK = "Open the settings and turn on dark mode"
NOW = "screen-now"  # the current screenshot (an opaque object to the code)


class Shot:
    """An opaque screenshot stand-in: the code must pass it through, never read it."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __repr__(self) -> str:
        return f"Shot({self.i})"


def steps(n: int) -> list[PlanStep]:
    return [
        PlanStep(thought=f"thought {i}", executed=f"click(start_box='({i},{i})')", screenshot=Shot(i)) for i in range(n)
    ]


def images(messages: list[dict]) -> list:
    """The image objects of `messages`, in order."""
    return [
        part["image"]
        for m in messages
        if isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "image"
    ]


def texts(message: dict) -> list[str]:
    content = message["content"]
    return [content] if isinstance(content, str) else [p["text"] for p in content if p["type"] == "text"]


def assistants(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "assistant"]


# ---------------------------------------------------------------- the spec


def test_coda_spec_holds_the_papers_facts():
    spec = get_planner_spec("coda")
    assert spec is CODA and isinstance(spec, PlannerSpec) and "coda" in PLANNER_SPECS.built_in()
    assert (spec.max_history_steps, spec.shown_screenshots, spec.task_prefix) == (15, 2, "\nTask: ")
    assert (spec.action_marker, spec.answer_token, spec.executor_format) == ("Action", "ANS", "uitars")
    assert (spec.executor_screen, spec.executor_factor, spec.executor_language) == ((1280, 800), 1000, "English")
    system = spec.planner_system(TASK)
    for section in ("## Output Format", "## Example", "## Note", "## User Instruction"):
        assert section in system
    assert "click(start_box='(116,58,197,90)')" in system and "ANS your_answer" in system
    assert system.endswith(f"## User Instruction\n{TASK}")
    executor = spec.executor_text(TASK)
    assert "<|box_start|>(x1,y1)<|box_end|>" in executor and "English" in executor and "{" not in executor
    for action in ("click(", "left_double(", "right_single(", "drag(", "hotkey(", "type(", "scroll(", "wait()"):
        assert action in executor
    assert "finished()" in executor and "call_user()" in executor


def test_braces_in_the_task_are_kept_as_written():
    task = "type {language} and {instruction} literally"
    assert CODA.planner_system(task).endswith(task)
    assert CODA.executor_text(task).endswith(task)


def test_unknown_spec_names_the_valid_ones_in_one_line():
    with pytest.raises(ValueError, match=r"unknown planner spec 'nope'; valid planner specs: .*coda") as info:
        get_planner_spec("nope")
    assert "\n" not in str(info.value)


def test_register_is_idempotent_and_refuses_a_different_spec_under_a_taken_name():
    assert register_planner_spec(CODA) is CODA  # importing twice is safe
    with pytest.raises(ValueError, match="planner spec 'coda' is already registered"):
        register_planner_spec(dataclasses.replace(CODA, max_history_steps=3))
    assert get_planner_spec("coda").max_history_steps == 15


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"planner_prompt": "no slot"}, "planner_prompt needs an {instruction} slot"),
        ({"executor_prompt": "no slot"}, "executor_prompt needs an {instruction} slot"),
        ({"shown_screenshots": -1}, "must be >= 0"),
        ({"answer_token": " "}, "must not be blank"),
    ],
)
def test_a_broken_spec_is_refused_in_one_line(change, error):
    with pytest.raises(ValueError, match=error.replace("{", r"\{").replace("}", r"\}")) as info:
        dataclasses.replace(CODA, name="broken", **change)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- the planner's context


@pytest.mark.parametrize("n", [0, 1, 2, 20])
def test_planner_context_keeps_two_screenshots_the_current_last_and_fifteen_steps(n):
    past = steps(n)
    messages = planner_messages(CODA, TASK, past, NOW)
    shown = images(messages)
    assert len(shown) == min(n + 1, 2)
    assert shown[-1] == NOW
    if n:
        assert shown[0] is past[-1].screenshot  # the previous screen, o_{t-1}
    assert messages[0] == {"role": "system", "content": CODA.planner_system(TASK)}
    kept = past[-15:]
    assert assistants(messages) == [f"{s.thought}\nAction: {s.executed}" for s in kept]
    assert len(assistants(messages)) <= 15
    last = messages[-1]
    assert last["role"] == "user" and last["content"][0] == {"type": "image", "image": NOW}
    assert texts(last) == [CODA.user_text, f"\nTask: {TASK}"]
    assert sum(f"Task: {TASK}" in t for m in messages for t in texts(m)) == 1  # only the last user turn


def test_older_user_turns_are_dropped_and_the_previous_one_sits_before_its_reply():
    messages = planner_messages(CODA, TASK, steps(4), NOW)
    roles = [m["role"] for m in messages]
    assert roles == ["system", "assistant", "assistant", "assistant", "user", "assistant", "user"]
    assert messages[-2]["content"] == "thought 3\nAction: click(start_box='(3,3)')"
    assert messages[-3]["content"][0]["image"].i == 3  # step 3's screen, then what was done on it


def test_a_spec_with_three_screenshots_shows_three_so_the_count_is_the_specs():
    """A negative control: the 2 above comes from the spec, not from a constant in the code."""
    wide = dataclasses.replace(CODA, name="wide", shown_screenshots=3, max_history_steps=4)
    messages = planner_messages(wide, TASK, steps(20), NOW)
    assert [getattr(i, "i", i) for i in images(messages)] == [18, 19, NOW]
    assert len(assistants(messages)) == 4
    assert images(planner_messages(dataclasses.replace(CODA, shown_screenshots=0), TASK, steps(3), NOW)) == []
    assert assistants(planner_messages(dataclasses.replace(CODA, max_history_steps=0), TASK, steps(3), NOW)) == []


def test_a_step_without_a_screenshot_keeps_its_text_turn():
    past = [PlanStep("look", "wait()", None)]
    messages = planner_messages(CODA, TASK, past, NOW)
    assert images(messages) == [NOW]
    assert messages[1] == {"role": "user", "content": [{"type": "text", "text": CODA.user_text}]}


# ---------------------------------------------------------------- splitting a reply

SPLITS = [
    pytest.param(
        "Thought: The gear icon opens settings.\nAction: click(start_box='(10,20)')",
        Plan("The gear icon opens settings.", "click(start_box='(10,20)')", None),
        id="plain",
    ),
    pytest.param(
        "I should scroll down to find it.", Plan("I should scroll down to find it.", None, None), id="no-action"
    ),
    pytest.param("Thought: go\nAction : wait()", Plan("go", "wait()", None), id="action-space-colon"),
    pytest.param("Thought: go\n  Action:wait()", Plan("go", "wait()", None), id="indented-action"),
    pytest.param(
        "Thought: a\r\nb\r\nAction: hotkey(key='enter')\r\n", Plan("a\r\nb", "hotkey(key='enter')", None), id="crlf"
    ),
    pytest.param(
        "Thought: The total is shown.\nAction: ```\nANS 42\n```",
        Plan("The total is shown.", "```\nANS 42\n```", "42"),
        id="ans-fenced",
    ),
    pytest.param(
        "Thought: t\nAction: ANS ```\nParis\n```", Plan("t", "ANS ```\nParis\n```", "Paris"), id="fence-after-ans"
    ),
    pytest.param("Thought: t\nAction: ANS ANS 5", Plan("t", "ANS ANS 5", "5"), id="doubled-ans"),
    pytest.param(
        "Thought: When done I will reply ANS 7.\nAction: click(start_box='(1,1)')",
        Plan("When done I will reply ANS 7.", "click(start_box='(1,1)')", None),
        id="ans-only-in-thought",
    ),
    pytest.param(
        "Thought: t\nAction: type(content='ANSWER')", Plan("t", "type(content='ANSWER')", None), id="ans-inside-a-word"
    ),
    pytest.param("", Plan("", None, None), id="empty"),
    pytest.param("Action: wait()", Plan("", "wait()", None), id="action-only"),
    pytest.param(
        "Thought: t\nActionable items first.", Plan("t\nActionable items first.", None, None), id="not-an-action-line"
    ),
    pytest.param(
        "Thought: t\nAction: a()\nAction: b()", Plan("t", "a()\nAction: b()", None), id="first-action-line-splits"
    ),
]


@pytest.mark.parametrize(("text", "plan"), SPLITS)
def test_split_plan(text, plan):
    assert split_plan(text, CODA) == plan


def test_split_reads_the_specs_tokens():
    spec = dataclasses.replace(CODA, name="other", action_marker="Do", answer_token="REPLY")
    assert split_plan("Thought: t\nDo: REPLY 3", spec) == Plan("t", "REPLY 3", "3")
    assert split_plan("Thought: t\nAction: ANS 3", spec) == Plan("t\nAction: ANS 3", None, None)


# ---------------------------------------------------------------- the executor's payload


def test_executor_gets_its_prompt_the_same_history_and_the_thought_to_complete():
    past, thought = steps(5), "Click the Dark mode switch in the Appearance panel."
    messages = executor_messages(CODA, TASK, past, NOW, thought)
    first, last = messages[0], messages[-1]
    assert first["role"] == "user" and texts(first) == [CODA.executor_text(TASK)] and TASK in texts(first)[0]
    assert last == {"role": "assistant", "content": thought + "\nAction: "}
    shown = images(messages)
    assert len(shown) == 2 and shown[-1] == NOW and shown[0] is past[-1].screenshot
    assert messages[1:-1] == planner_messages(CODA, TASK, past, NOW)[1:]  # the planner's history, as it saw it


def test_the_table_sits_in_the_current_turn_before_the_task_and_only_the_planner_reads_it():
    table = "[1] button 'OK' (10, 20, 30, 12)"
    past = steps(3)
    messages = planner_messages(CODA, TASK, past, NOW, table)
    assert texts(messages[-1]) == [CODA.user_text, f"\n{table}", f"{CODA.task_prefix}{TASK}"]
    assert sum(table in t for m in messages for t in texts(m)) == 1  # the current screen's table, not the past ones
    without = planner_messages(CODA, TASK, past, NOW)
    assert messages[:-1] == without[:-1] and texts(without[-1]) == [CODA.user_text, f"{CODA.task_prefix}{TASK}"]
    assert planner_messages(CODA, TASK, past, NOW, "") == without  # an empty table is no part
    executor = executor_messages(CODA, TASK, past, NOW, "Click OK.")
    assert not any(table in t for m in executor for t in texts(m))  # a model executor sees screenshots alone


# ---------------------------------------------------------------- fuzz

PIECES = st.sampled_from(["Thought:", "Action", "Action:", " : ", "ANS", "```", "\n", "\r\n", "\r", " ", "x", "(", "'"])
REPLIES = st.one_of(st.text(), st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=30).map("".join))


@settings(max_examples=400, deadline=None)
@given(REPLIES)
def test_split_plan_never_raises_and_its_thought_comes_from_the_head(text):
    plan = split_plan(text, CODA)
    assert plan.thought == plan.thought.strip() and plan.thought in text
    if plan.planner_action is None:
        assert plan.answer is None
        assert plan.thought in text  # no Action line: the whole text, less a leading Thought:
    elif plan.thought and plan.planner_action:
        assert text.find(plan.thought) + len(plan.thought) <= text.rfind(plan.planner_action)  # thought before action
    if plan.answer is not None:
        assert "ANS" in plan.planner_action and plan.answer in plan.planner_action


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.booleans())
def test_planner_context_never_holds_more_than_two_screenshots(n, max_history, blank_shots):
    spec = dataclasses.replace(CODA, max_history_steps=max_history)
    past = [PlanStep(f"t{i}", "wait()", None if blank_shots and i % 2 else Shot(i)) for i in range(n)]
    messages = planner_messages(spec, TASK, past, NOW)
    assert len(images(messages)) <= 2 and images(messages)[-1] == NOW
    assert len(assistants(messages)) == min(n, max_history)
    assert len(images(executor_messages(spec, TASK, past, NOW, "t"))) <= 2
