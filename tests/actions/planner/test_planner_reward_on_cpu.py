"""CODA's Stage-1 step reward: a matching kind scores 1, plus a distance score in [0, 1] by the kind's rule (point
L1, box IoU, text similarity, key sets, scroll direction and position); a wrong kind or an invalid prediction scores
0, coordinates count, and no prediction makes it raise."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.actions.planner.reward import HOWS, MAX_REWARD, REWARD_TABLE, ActionMatch, action_match
from verl_cua.actions.types import ACTION_KINDS, POINTER_KINDS, GUIAction, ParsedAction

SCREEN = (1001, 501)  # pixel spans 1000 x 500: the L1 normalisers
SPAN_W, SPAN_H = SCREEN[0] - 1, SCREEN[1] - 1
RIGHT, BOTTOM = SCREEN[0] - 1, SCREEN[1] - 1


def close(dx: float, dy: float) -> float:
    """The rule's closeness of two points `dx, dy` pixels apart: 1 - (|dx| / span_w + |dy| / span_h) / 2."""
    return 1 - (abs(dx) / SPAN_W + abs(dy) / SPAN_H) / 2


def click(x, y, kind="click"):
    return GUIAction(kind, x=x, y=y)


def drag(x, y, x2, y2):
    return GUIAction("drag", x=x, y=y, x2=x2, y2=y2)


def typed(text):
    return GUIAction("type", text=text)


def chord(*keys):
    return GUIAction("key", keys=list(keys))


def scroll(dy, x=None, y=None, dx=0):
    return GUIAction("scroll", x=x, y=y, dx=dx, dy=dy)


CASES = [
    # kinds
    pytest.param(
        click(10, 10, "double_click"), click(10, 10), None, 0.0, "mismatch", id="click-variant-is-another-type"
    ),
    pytest.param(GUIAction("type", text="a"), click(10, 10), None, 0.0, "mismatch", id="type-vs-click"),
    pytest.param(GUIAction("wait"), GUIAction("done"), None, 0.0, "mismatch", id="wait-vs-done"),
    # point L1
    pytest.param(click(300, 200), click(300, 200), None, 2.0, "point-l1", id="exact-click"),
    pytest.param(click(300, 200, "right_click"), click(300, 200, "right_click"), None, 2.0, "point-l1", id="exact-rc"),
    pytest.param(click(0, 0), click(RIGHT, BOTTOM), None, 1.0, "point-l1", id="off-by-the-full-screen"),
    pytest.param(click(RIGHT, 0), click(0, BOTTOM), None, 1.0, "point-l1", id="other-diagonal-corners"),
    pytest.param(click(SPAN_W // 2, SPAN_H // 2), click(0, 0), None, 1.5, "point-l1", id="half-way"),
    pytest.param(click(SPAN_W // 2, 0), click(0, 0), None, 1 + close(SPAN_W // 2, 0), "point-l1", id="half-way-x"),
    pytest.param(click(-50, -70), click(0, 0), None, 2.0, "point-l1", id="off-screen-clamped-to-corner"),
    pytest.param(click(RIGHT + 9, BOTTOM + 9), click(RIGHT, BOTTOM), None, 2.0, "point-l1", id="far-corner-clamped"),
    pytest.param(click(None, None), click(None, None), None, 2.0, "point-l1", id="both-at-cursor"),
    pytest.param(click(None, None), click(5, 5), None, 1.0, "point-l1", id="cursor-vs-point"),
    pytest.param(click(40, 30, "move"), click(10, 10, "move"), None, 1 + close(30, 20), "point-l1", id="move"),
    # box target
    pytest.param(click(150, 120), click(0, 0), (100, 100, 200, 150), 2.0, "point-box", id="box-inside"),
    pytest.param(click(200, 150), click(0, 0), (100, 100, 200, 150), 2.0, "point-box", id="box-corner-inclusive"),
    pytest.param(click(250, 120), click(0, 0), (200, 150, 100, 100), 1 + close(50, 0), "point-box", id="box-right"),
    pytest.param(click(10, 20), click(0, 0), (100, 100, 200, 150), 1 + close(90, 80), "point-box", id="box-outside"),
    pytest.param(click(0, 0), click(0, 0), (0, 0, RIGHT, BOTTOM), 2.0, "point-box", id="box-the-whole-screen"),
    # drag IoU
    pytest.param(drag(0, 0, 100, 100), drag(0, 0, 100, 100), None, 2.0, "box-iou", id="drag-same"),
    pytest.param(drag(100, 100, 0, 0), drag(0, 0, 100, 100), None, 2.0, "box-iou", id="drag-reversed-same-box"),
    pytest.param(drag(0, 0, 100, 50), drag(0, 0, 100, 100), None, 1.5, "box-iou", id="drag-half"),
    pytest.param(drag(50, 0, 150, 100), drag(0, 0, 100, 100), None, 1 + 1 / 3, "box-iou", id="drag-a-third"),
    pytest.param(drag(200, 200, 300, 300), drag(0, 0, 100, 100), None, 1.0, "box-iou", id="drag-disjoint"),
    pytest.param(drag(100, 0, 200, 100), drag(0, 0, 100, 100), None, 1.0, "box-iou", id="drag-touching-edge"),
    pytest.param(drag(0, 0, 100, 0), drag(0, 0, 100, 0), None, 2.0, "point-l1", id="degenerate-same"),
    pytest.param(drag(0, 10, 100, 10), drag(0, 0, 100, 0), None, 1 + close(0, 10), "point-l1", id="degenerate-shift"),
    pytest.param(
        drag(0, 0, 100, 100), drag(0, 0, 0, 200), None, 1 + (1 + close(100, 100)) / 2, "point-l1", id="one-degenerate"
    ),
    pytest.param(GUIAction("drag", x2=100, y2=100), drag(0, 0, 100, 100), None, 1.5, "point-l1", id="drag-from-cursor"),
    # type
    pytest.param(typed("hello"), typed("hello"), None, 2.0, "text", id="type-exact"),
    pytest.param(typed("help"), typed("hello"), None, 1 + 2 * 3 / 9, "text", id="type-partial"),  # 2 * "hel" / 9
    pytest.param(typed(""), typed("hello"), None, 1.0, "text", id="type-empty"),
    pytest.param(typed(""), typed(None), None, 2.0, "text", id="type-both-empty"),
    pytest.param(typed("Hello"), typed("hello"), None, 1 + 2 * 4 / 10, "text", id="type-case-counts"),
    # key
    pytest.param(chord("c", "ctrl"), chord("ctrl", "c"), None, 2.0, "keys", id="chord-in-another-order"),
    pytest.param(chord("Control", "C"), chord("ctrl", "c"), None, 2.0, "keys", id="chord-aliases"),
    pytest.param(chord("ctrl", "v"), chord("ctrl", "c"), None, 1 + 1 / 3, "keys", id="chord-jaccard"),
    pytest.param(chord("enter"), chord("esc"), None, 1.0, "keys", id="key-other"),
    # scroll
    pytest.param(scroll(-5, 10, 10), scroll(-3, 10, 10), None, 2.0, "scroll", id="scroll-same-direction"),
    pytest.param(scroll(5, 10, 10), scroll(-3, 10, 10), None, 1.5, "scroll", id="scroll-opposite"),
    pytest.param(scroll(-1), scroll(-9), None, 2.0, "scroll", id="scroll-no-positions"),
    pytest.param(scroll(-1, 0, 0), scroll(-1, RIGHT, BOTTOM), None, 1.5, "scroll", id="scroll-corners"),
    pytest.param(scroll(0, dx=2), scroll(-2), None, 1.5, "scroll", id="scroll-sideways-vs-down"),
    # parameterless and api
    pytest.param(GUIAction("wait"), GUIAction("wait"), None, 2.0, "none", id="wait"),
    pytest.param(GUIAction("done", text="42"), GUIAction("done", text="41"), None, 2.0, "none", id="done-answer"),
    pytest.param(GUIAction("fail"), GUIAction("fail"), None, 2.0, "none", id="fail"),
    pytest.param(
        GUIAction("api", api="T.set", args={"a": 1, "b": 2}),
        GUIAction("api", api="T.set", args={"a": 1, "b": 3}),
        None,
        1.5,
        "api",
        id="api-half-args",
    ),
    pytest.param(GUIAction("api", api="T.get"), GUIAction("api", api="T.set"), None, 1.0, "api", id="api-other"),
]


@pytest.mark.parametrize("predicted,target,box,total,how", CASES)
def test_each_kind_scores_by_its_rule(predicted, target, box, total, how):
    match = action_match([predicted], target, SCREEN, target_box=box)
    assert match.total == pytest.approx(total)
    assert match.how == how
    assert match.total == pytest.approx(match.type_match + match.distance)
    assert match.type_match == (0 if how == "mismatch" else 1)


@pytest.mark.parametrize(
    "predicted",
    [
        None,
        [],
        (),
        ParsedAction(valid=False, error="no action"),
        ParsedAction(valid=True, actions=[]),
        ParsedAction(valid=True, actions=[], code="print(1)"),
        [GUIAction("click", x=10, y=None)],
        [GUIAction("click", x=float("nan"), y=10)],
        [GUIAction("click", x=10**400, y=10)],
        [GUIAction("drag", x=0, y=0)],
        [GUIAction("click", x="10", y=10)],
        [GUIAction("key", keys="ctrl+c")],
        [GUIAction("nonsense", x=10, y=10)],
    ],
)
def test_an_invalid_or_unusable_prediction_scores_zero(predicted):
    assert action_match(predicted, GUIAction("click", x=10, y=10), SCREEN) == ActionMatch(0, 0.0, 0.0, "invalid")


def test_the_first_action_is_scored_whatever_follows():
    target = click(40, 40)
    assert action_match([click(40, 40), GUIAction("done")], target, SCREEN).total == 2.0
    assert action_match([GUIAction("wait"), click(40, 40)], target, SCREEN).total == 0.0
    parsed = ParsedAction(valid=True, actions=[click(40, 40), click(0, 0)])
    assert action_match(parsed, target, SCREEN) == action_match(click(40, 40), target, SCREEN)


@pytest.mark.parametrize("screen", [(0, 500), (500, 0), (0, 0), (-1, 5), (10,), "1000x500", (10.0, 10)])
def test_a_bad_screen_raises_one_line(screen):
    with pytest.raises(ValueError) as info:
        action_match([click(0, 0)], click(0, 0), screen)
    assert "\n" not in str(info.value) and "screen" in str(info.value)


@pytest.mark.parametrize(
    "target,box",
    [
        (GUIAction("click", x=1, y=None), None),
        (GUIAction("drag", x=1, y=1), None),
        (GUIAction("bogus"), None),
        ("click", None),
        (GUIAction("type", text="x"), (0, 0, 5, 5)),
        (click(1, 1), (0, 0, 5)),
        (click(1, 1), (0, 0, float("inf"), 5)),
        (click(1, 1), (0, None, 5, 5)),
    ],
)
def test_a_bad_target_or_box_raises_one_line_even_for_an_invalid_prediction(target, box):
    with pytest.raises(ValueError) as info:
        action_match(None, target, SCREEN, target_box=box)
    assert "\n" not in str(info.value)


def test_a_prediction_of_the_wrong_python_type_is_a_caller_error():
    with pytest.raises(TypeError):
        action_match("click(1, 1)", click(1, 1), SCREEN)
    with pytest.raises(TypeError):
        action_match([{"kind": "click"}], click(1, 1), SCREEN)


def test_the_table_gives_every_action_kind_a_rule_and_max_reward_is_reached():
    assert set(REWARD_TABLE) == set(ACTION_KINDS)
    assert {REWARD_TABLE[k] for k in POINTER_KINDS} == {"point-l1"}
    assert set(REWARD_TABLE.values()) <= set(HOWS)
    assert action_match([click(7, 7)], click(7, 7), SCREEN).total == MAX_REWARD


def test_coordinates_count_negative_control():
    """A reward that ignored coordinates (or only looked at kinds) would give these the same score."""
    target = click(400, 300)
    near, far = action_match([click(410, 300)], target, SCREEN), action_match([click(900, 20)], target, SCREEN)
    assert near.total > far.total > 1.0
    assert action_match([click(400, 301)], target, SCREEN).total < MAX_REWARD  # one pixel off is not exact
    boxes = [action_match([drag(0, 0, w, 100)], drag(0, 0, 100, 100), SCREEN).total for w in (100, 60, 20)]
    assert boxes == sorted(boxes, reverse=True) and len(set(boxes)) == 3


# ---------------------------------------------------------------------------------------------------- properties

coord = st.integers(min_value=-50, max_value=SCREEN[0] + 50)
maybe = st.none() | coord
kinds = st.sampled_from(ACTION_KINDS)
actions = st.builds(
    GUIAction,
    kind=kinds,
    x=maybe,
    y=maybe,
    x2=maybe,
    y2=maybe,
    text=st.none() | st.text(max_size=12),
    keys=st.none() | st.lists(st.sampled_from(["ctrl", "shift", "c", "v", "Return", "esc", "zzz"]), max_size=3),
    dx=st.none() | st.integers(-5, 5),
    dy=st.none() | st.integers(-5, 5),
    api=st.none() | st.sampled_from(["A.f", "A.g"]),
    args=st.none() | st.dictionaries(st.sampled_from("ab"), st.integers(0, 2), max_size=2),
)
screens = st.tuples(st.integers(1, 3000), st.integers(1, 3000))


def _score_or_label_error(predicted, target, screen):
    try:
        return action_match(predicted, target, screen)
    except ValueError:  # a generated target can be a bad label (a half point, a drag without its end)
        return None


@settings(max_examples=300, deadline=None)
@given(predicted=st.none() | st.lists(actions, max_size=2), target=actions, screen=screens)
def test_every_score_is_finite_and_within_its_range(predicted, target, screen):
    match = _score_or_label_error(predicted, target, screen)
    if match is None:
        return
    assert match.type_match in (0, 1)
    assert all(math.isfinite(v) for v in (match.distance, match.total))
    assert 0.0 <= match.distance <= 1.0 and 0.0 <= match.total <= MAX_REWARD
    assert match.total == match.type_match + match.distance
    assert match.how in HOWS
    if match.type_match == 0:
        assert match.total == 0.0


point = st.tuples(st.integers(0, SCREEN[0] - 1), st.integers(0, SCREEN[1] - 1))


@settings(max_examples=200, deadline=None)
@given(a=point, b=point, kind=st.sampled_from(sorted(POINTER_KINDS)))
def test_point_l1_is_symmetric_and_exact_only_on_the_target(a, b, kind):
    forward = action_match([click(*a, kind)], click(*b, kind), SCREEN)
    assert forward == action_match([click(*b, kind)], click(*a, kind), SCREEN)
    assert (forward.total == MAX_REWARD) == (a == b)


step = st.integers(0, 2 * SCREEN[0])


@settings(max_examples=300, deadline=None)
@given(
    target=point,
    offset=st.tuples(st.integers(-SCREEN[0], SCREEN[0]), st.integers(-SCREEN[1], SCREEN[1])),
    further=st.tuples(step, step),
    boxed=st.booleans(),
)
def test_moving_a_click_farther_from_the_target_never_raises_its_score(target, offset, further, boxed):
    tx, ty = target
    box = (tx - 20, ty - 10, tx + 20, ty + 10) if boxed else None
    near = (tx + offset[0], ty + offset[1])
    away = tuple(n + math.copysign(f, o) for n, f, o in zip(near, further, offset, strict=True))
    score_near = action_match([click(*near)], click(tx, ty), SCREEN, target_box=box).total
    score_away = action_match([click(*away)], click(tx, ty), SCREEN, target_box=box).total
    assert score_away <= score_near
