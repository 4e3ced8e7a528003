"""The grounding stand-in (a CPU executor, not a model): the element a thought names is clicked at its centre as
`parse_action(format="uitars")` reads it back on any screen and image size; type, finished and wait; and a thought
naming another element lands elsewhere, so the stand-in really reads the thought."""

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from verl_cua.actions import parse_action
from verl_cua.envs.base import Observation
from verl_cua.envs.observation import Element
from verl_cua.eval.executor import ExecutorSettings, make_executor
from verl_cua.testing.grounding_standin import GroundingStandIn, choose_action, named_element, planner_thought

ELEMENTS = [
    Element("button", (0, 0, 40, 20), text="File"),
    Element("push-button", (200, 30, 80, 24), name="Save"),
    Element("entry", (52, 97, 301, 31), id="search-box", text=""),
    Element("link", (500, 340, 13, 9), text="Save as PDF"),
    Element("button", (1100, 680, 90, 35), text="OK"),
]
# (screen, image the reply is parsed with): the image exactly the screen, the format's default resize, a resized
# image smaller than the screen, UI-TARS-1.0's relative 1000x1000, a MiniWoB-sized screen below the minimum pixels
SIZES = [
    ((1280, 720), (1280, 720)),
    ((1920, 1080), None),
    ((1920, 1080), (1280, 720)),
    ((1280, 800), (1000, 1000)),
    ((1280, 720), (700, 400)),
]


def messages(thought: str) -> list[dict]:
    """CODA's executor payload, short: the prompt, then the planner's thought to continue."""
    return [
        {"role": "user", "content": [{"type": "text", "text": "## User Instruction\nsave the file"}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"{thought}\nAction: "}]},
    ]


def observation(screen: tuple[int, int], elements: list[Element]) -> Observation:
    """An env observation of `screen` size showing `elements`."""
    return Observation(Image.new("RGB", screen), "save the file", {"elements": elements})


def clicked(reply: str, screen: tuple[int, int], image: tuple[int, int] | None) -> tuple[int, int]:
    """Where `reply` clicks, as the uitars parser reads it."""
    parsed = parse_action(reply, format="uitars", screen=screen, image=image)
    assert parsed.valid and not parsed.error, parsed.error
    (action,) = parsed.actions
    assert action.kind == "click"
    return action.x, action.y


def near(point: tuple[int, int], element: Element, tolerance: int = 1) -> bool:
    """Whether `point` is within `tolerance` px of the element's centre on both axes."""
    return abs(point[0] - element.centre[0]) <= tolerance and abs(point[1] - element.centre[1]) <= tolerance


@pytest.mark.parametrize(("screen", "image"), SIZES)
@pytest.mark.parametrize("index", [0, 1, 2, 4])
def test_the_named_element_is_clicked_at_its_centre_on_every_size(screen, image, index):
    element = ELEMENTS[index]
    name = element.text or element.name or element.id
    standin = GroundingStandIn(image=image)
    reply = standin.act(messages(f"Thought: The next step needs '{name}'; click it."), observation(screen, ELEMENTS))
    assert near(clicked(reply.text, screen, image), element)


def test_a_plain_element_list_needs_the_screen_from_the_constructor():
    standin = GroundingStandIn(screen=(1920, 1080), image=(1280, 720))
    reply = standin.act(messages("Click the OK button to confirm."), ELEMENTS)
    assert near(clicked(reply.text, (1920, 1080), (1280, 720)), ELEMENTS[4])
    with pytest.raises(ValueError, match="needs the screen size"):
        GroundingStandIn().act(messages("Click the OK button."), ELEMENTS)
    assert GroundingStandIn().act(messages("Type 'abc' in the box."), ELEMENTS).text == "Action: type(content='abc')"


def test_a_thought_naming_another_element_lands_elsewhere():
    screen = (1920, 1080)
    standin = GroundingStandIn()
    at_save = clicked(standin.act(messages("Click 'Save'."), observation(screen, ELEMENTS)).text, screen, None)
    at_ok = clicked(standin.act(messages("Click 'OK'."), observation(screen, ELEMENTS)).text, screen, None)
    assert near(at_save, ELEMENTS[1]) and near(at_ok, ELEMENTS[4])
    assert not near(at_save, ELEMENTS[4], tolerance=20) and not near(at_ok, ELEMENTS[1], tolerance=20)


def test_a_quote_wins_over_a_longer_unquoted_name_and_ties_go_to_the_first():
    assert named_element("Click 'Save', not the Save as PDF link", ELEMENTS) is ELEMENTS[1]
    assert named_element("Click the Save as PDF link next to Save", ELEMENTS) is ELEMENTS[3]  # the longest match
    twins = [Element("button", (0, 0, 10, 10), text="Next"), Element("button", (50, 50, 10, 10), text="next")]
    assert named_element("Go to the NEXT page", twins) is twins[0]
    assert named_element("Click 'NEXT'", twins) is twins[0]
    assert named_element("Click the 'search-box' field", ELEMENTS) is ELEMENTS[2]  # by id
    assert named_element("Profile the disk", ELEMENTS) is None  # "file" inside "Profile" is no whole word


words = st.text(alphabet="qxzjkv", min_size=3, max_size=8)


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(words, min_size=2, max_size=6, unique=True), data=st.data())
def test_any_element_is_found_by_its_text_in_any_case_quoted_or_not(texts, data):
    elements = [Element("button", (40 * i, 10 * i, 30, 16), text=t) for i, t in enumerate(texts)]
    target = data.draw(st.sampled_from(range(len(texts))))
    name = data.draw(st.sampled_from([texts[target], texts[target].upper(), texts[target].title()]))
    template = data.draw(st.sampled_from(["Click on {} now.", "I will press the '{}' button", 'Select "{}".']))
    thought = template.format(name)
    assert named_element(thought, elements) is elements[target]  # whole words: "qxz" is not in "qxzk"
    action = choose_action(thought, elements)
    assert (action.kind, action.x, action.y) == ("click", *elements[target].centre)


@pytest.mark.parametrize(
    ("thought", "typed"),
    [
        ("Type 'hello world' into the search box.", "hello world"),
        ('Now enter "don\'t stop" in the field', "don't stop"),
        ("Click the 'search-box' field, then type 'cats'", "cats"),
    ],
)
def test_a_quoted_text_after_a_typing_verb_is_typed(thought, typed):
    reply = GroundingStandIn().act(messages(thought), observation((1280, 720), ELEMENTS))
    parsed = parse_action(reply.text, format="uitars", screen=(1280, 720))
    assert parsed.valid and [(a.kind, a.text) for a in parsed.actions] == [("type", typed)]


def test_a_done_task_finishes_and_a_thought_naming_nothing_waits():
    obs = observation((1280, 720), ELEMENTS)
    standin = GroundingStandIn()
    assert standin.act(messages("The task is now complete."), obs).text == "Action: finished()"
    assert standin.act(messages("Nothing more to do here."), obs).text == "Action: finished()"
    assert standin.act(messages("The page is still loading."), obs).text == "Action: wait()"
    assert standin.act(messages("Press Enter to submit the form."), obs).text == "Action: wait()"  # a key, no text
    enter = [Element("button", (0, 0, 4, 4), text="Enter")]
    assert choose_action("Click the 'Enter' button", enter).kind == "click"  # a verb inside quotes is a name
    assert standin.stats.snapshot()["calls"] == 4


def test_the_thought_is_read_from_the_final_assistant_message_only():
    assert planner_thought(messages("Thought: click 'OK'")) == "click 'OK'"
    assert planner_thought([{"role": "assistant", "content": "click 'OK'\nAction: "}]) == "click 'OK'"
    standin = GroundingStandIn()
    with pytest.raises(ValueError, match="must end with the assistant's"):
        standin.act(messages("click 'OK'")[:1], ELEMENTS)
    assert standin.stats.snapshot()["failures"] == 1


def test_make_executor_builds_it_and_act_async_answers():
    standin = make_executor(ExecutorSettings(kind="standin_grounding"), screen=(1280, 720))
    assert isinstance(standin, GroundingStandIn)
    reply = asyncio.run(standin.act_async(messages("Click 'File'"), ELEMENTS))
    assert near(clicked(reply.text, (1280, 720), None), ELEMENTS[0])
    stats = standin.stats.snapshot()
    assert (stats["calls"], stats["failures"], stats["retries"]) == (1, 0, 0)
