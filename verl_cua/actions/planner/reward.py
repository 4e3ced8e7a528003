"""CODA Stage-1 step reward: how well the executor's action matches a state's labelled target action, in [0, 2].

CODA (arXiv 2508.20096) trains its planner with step-level GRPO on recorded states: the frozen executor turns the
planner's instruction into an action `a`, scored against the state's target `a_T` by
`r = 1[type(a) == type(a_T)] + r_dist(a, a_T)` with `r_dist` in [0, 1] (SEAgent's reward has the same shape).
`action_match` computes it on `GUIAction`s in screen pixels; the choices it makes:

* The prediction's first action is scored, whatever follows it (CODA's executor emits one action per step). The
  first, not the first non-terminal one: it is what the desktop would run first, and a policy gains nothing by
  hedging with more actions. `None`, an empty list, an invalid `ParsedAction` and a valid one without actions (the
  raw-code path) score 0 with `how="invalid"`; so does a prediction whose fields are unusable (a half point, a
  non-finite coordinate, a drag without its end). A prediction never makes `action_match` raise; a bad target,
  `target_box` or `screen` (caller or data errors) raises ValueError in one line.
* Types are the kinds of `verl_cua.actions.types`, kept distinct: `click`, `double_click` and `right_click` are
  three types, as UI-TARS's `click`, `left_double` and `right_single` are in CODA.
* The distance counts only when the kinds match; a wrong kind scores 0 in all (`how="mismatch"`), as in SEAgent.
* Points are clamped onto the screen first (what the parser does) and compared by L1 normalised by the screen's
  pixel span, `(|dx| / (W - 1) + |dy| / (H - 1)) / 2` (a span of 0 counts as 1), so two opposite corners are 1
  apart and the closeness `1 - L1` runs over exactly [0, 1] (SEAgent divides by W, H: 1/W less at the far end).
* A pointer without coordinates acts at the current cursor position, which a recorded state does not give: two
  such pointers are at the same place (closeness 1), one with and one without are not (0). The same holds for the
  position of a scroll and the start of a drag.
* `target_box=(x1, y1, x2, y2)` (a labelled element's box, screen pixels, either corner order, edges inclusive)
  replaces the target's point for pointer kinds: a predicted point inside scores 1, outside `1 - L1` to the box's
  nearest point (`how="point-box"`). A box on another kind raises ValueError.
* A drag spans the box of its start and end points; two drags score that box's IoU (`how="box-iou"`). IoU ignores
  direction: a drag reversed, or along the other diagonal of the same box, scores 1. When either box has no area (a
  horizontal or vertical drag) or a start is missing, the score is the mean closeness of the two starts and the
  two ends (`how="point-l1"`).
* `type`: `difflib.SequenceMatcher(autojunk=False).ratio()` on the literal text (case, spaces and a trailing
  newline count; equal texts, the empty one too, score 1, one empty side 0).
* `key`: keys normalised to pyautogui names (`verl_cua.actions.keys`, an unknown name lower-cased as it is), then
  the sets' Jaccard index: the same chord in any order scores 1.
* `scroll`: the mean of direction agreement (1 when the signs of `(dx, dy)` both agree, else 0) and the position
  closeness; the amount is ignored (formats count scroll units differently; UI-TARS gives none).
* `wait`, `done`, `fail`: 1 (`how="none"`); an answer or reason text is the task evaluator's business, not this
  step reward's.
* `api`: 0 for another API; for the same one, the fraction of argument names (either side's) whose values are
  equal, 1 when neither has arguments.

| kind | rule (`REWARD_TABLE`) | distance when the kinds match |
|---|---|---|
| click, double_click, triple_click, right_click, middle_click, move | point-l1 | `1 - L1` (to `target_box` if given) |
| drag | box-iou | IoU of the spanned boxes; degenerate: mean endpoint closeness |
| scroll | scroll | (direction agreement + position closeness) / 2 |
| type | text | SequenceMatcher ratio |
| key | keys | Jaccard index of the normalised key sets |
| wait, done, fail | none | 1 |
| api | api | same API: fraction of equal arguments; else 0 |
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from types import MappingProxyType

from verl_cua.actions.geometry import check_size
from verl_cua.actions.keys import normalize_key
from verl_cua.actions.types import ACTION_KINDS, POINTER_KINDS, ActionError, GUIAction, ParsedAction

MAX_REWARD = 2.0  # a matching kind (1) plus the largest distance score (1)

Point = tuple[float, float]
Box = tuple[float, float, float, float]  # x1, y1, x2, y2 with x1 <= x2, y1 <= y2

#: The distance rule of each kind (its `how` word, or the word of the rule's main branch).
REWARD_TABLE: Mapping[str, str] = MappingProxyType(
    {
        **{kind: "point-l1" for kind in ACTION_KINDS if kind in POINTER_KINDS},
        "drag": "box-iou",
        "scroll": "scroll",
        "type": "text",
        "key": "keys",
        "wait": "none",
        "done": "none",
        "fail": "none",
        "api": "api",
    }
)
#: Every `ActionMatch.how`: the rule words, the box-target and degenerate-drag branches, and the zero scores.
HOWS = ("point-l1", "point-box", "box-iou", "scroll", "text", "keys", "api", "none", "mismatch", "invalid")


@dataclass(frozen=True, slots=True)
class ActionMatch:
    """One step's score: `type_match` (0 or 1) + `distance` (0..1, 0 unless the kinds match) = `total` (0..2)."""

    type_match: int
    distance: float
    total: float
    how: str


_INVALID = ActionMatch(0, 0.0, 0.0, "invalid")
_MISMATCH = ActionMatch(0, 0.0, 0.0, "mismatch")


class _Malformed(ValueError):
    """A field of an action is not a usable value (the message says which)."""


@dataclass(frozen=True, slots=True)
class _Fields:
    """An action's fields as the rules compare them: points clamped onto the screen, keys as a set, scroll signs."""

    kind: str
    point: Point | None  # a pointer's point, a scroll's position, a drag's start
    end: Point | None  # a drag's end
    text: str
    keys: frozenset[str]
    direction: tuple[int, int]  # the signs of (dx, dy)
    api: str | None
    args: Mapping


def action_match(
    predicted: ParsedAction | Sequence[GUIAction] | GUIAction | None,
    target: GUIAction,
    screen: tuple[int, int],
    *,
    target_box: Sequence[float] | None = None,
) -> ActionMatch:
    """Score the first predicted action against the labelled `target` on a `(width, height)` screen (pixels)."""
    screen = check_size(screen, "screen")
    try:
        want = _fields(target, screen)
    except _Malformed as exc:
        raise ValueError(f"target action: {exc}") from None
    box = _target_box(target_box, want.kind, screen)
    first = _first_action(predicted)
    if first is None:
        return _INVALID
    try:
        got = _fields(first, screen)
    except _Malformed:
        return _INVALID
    if got.kind != want.kind:
        return _MISMATCH
    distance, how = _RULES[REWARD_TABLE[want.kind]](got, want, screen, box)
    distance = min(max(distance, 0.0), 1.0)
    return ActionMatch(1, distance, 1.0 + distance, how)


# ---------------------------------------------------------------------------------------------------- the rules


def _pointer(got: _Fields, want: _Fields, screen: tuple[int, int], box: Box | None) -> tuple[float, str]:
    if box is None:
        return _closeness(got.point, want.point, screen), "point-l1"
    if got.point is None:
        return 0.0, "point-box"
    x, y = got.point
    nearest = (min(max(x, box[0]), box[2]), min(max(y, box[1]), box[3]))
    return _closeness(got.point, nearest, screen), "point-box"


def _drag(got: _Fields, want: _Fields, screen: tuple[int, int], box: Box | None) -> tuple[float, str]:
    a, b = _span(got), _span(want)
    if a is None or b is None or _area(a) == 0 or _area(b) == 0:
        ends = _closeness(got.point, want.point, screen) + _closeness(got.end, want.end, screen)
        return ends / 2, "point-l1"
    inner = (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))
    overlap = _area(inner) if inner[0] < inner[2] and inner[1] < inner[3] else 0.0
    return overlap / (_area(a) + _area(b) - overlap), "box-iou"


def _scroll(got: _Fields, want: _Fields, screen: tuple[int, int], box: Box | None) -> tuple[float, str]:
    direction = float(got.direction == want.direction)
    return (direction + _closeness(got.point, want.point, screen)) / 2, "scroll"


def _text(got: _Fields, want: _Fields, screen: tuple[int, int], box: Box | None) -> tuple[float, str]:
    if got.text == want.text:
        return 1.0, "text"
    return SequenceMatcher(None, got.text, want.text, autojunk=False).ratio(), "text"


def _keys(got: _Fields, want: _Fields, screen: tuple[int, int], box: Box | None) -> tuple[float, str]:
    if got.keys == want.keys:
        return 1.0, "keys"
    return len(got.keys & want.keys) / len(got.keys | want.keys), "keys"


def _none(got: _Fields, want: _Fields, screen: tuple[int, int], box: Box | None) -> tuple[float, str]:
    return 1.0, "none"


def _api(got: _Fields, want: _Fields, screen: tuple[int, int], box: Box | None) -> tuple[float, str]:
    if got.api != want.api:
        return 0.0, "api"
    names = set(got.args) | set(want.args)
    if not names:
        return 1.0, "api"
    same = sum(1 for n in names if n in got.args and n in want.args and got.args[n] == want.args[n])
    return same / len(names), "api"


_Rule = Callable[[_Fields, _Fields, tuple[int, int], Box | None], tuple[float, str]]
_RULES: dict[str, _Rule] = {
    "point-l1": _pointer,
    "box-iou": _drag,
    "scroll": _scroll,
    "text": _text,
    "keys": _keys,
    "none": _none,
    "api": _api,
}


# ---------------------------------------------------------------------------------------------------- geometry


def _closeness(p: Point | None, q: Point | None, screen: tuple[int, int]) -> float:
    """`1 - L1` of two screen points normalised by the screen's pixel span; a missing point matches only another."""
    if p is None or q is None:
        return float(p is None and q is None)
    span_w, span_h = max(screen[0] - 1, 1), max(screen[1] - 1, 1)
    return 1.0 - (abs(p[0] - q[0]) / span_w + abs(p[1] - q[1]) / span_h) / 2


def _span(action: _Fields) -> Box | None:
    if action.point is None or action.end is None:
        return None
    (x1, y1), (x2, y2) = action.point, action.end
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def _area(box: Box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


# ---------------------------------------------------------------------------------------------------- inputs


def _first_action(predicted: object) -> GUIAction | None:
    """The action to score, or None for an invalid or empty prediction."""
    if predicted is None:
        return None
    if isinstance(predicted, ParsedAction):
        return predicted.actions[0] if predicted.valid and predicted.actions else None
    if isinstance(predicted, GUIAction):
        return predicted
    if isinstance(predicted, Sequence) and not isinstance(predicted, (str, bytes)):
        if predicted and not isinstance(predicted[0], GUIAction):
            raise TypeError(f"predicted actions must be GUIAction objects, got {type(predicted[0]).__name__}")
        return predicted[0] if predicted else None
    raise TypeError(
        f"predicted must be a ParsedAction, a GUIAction, a sequence of them or None, got {type(predicted).__name__}"
    )


def _fields(action: object, screen: tuple[int, int]) -> _Fields:
    if not isinstance(action, GUIAction):
        raise _Malformed(f"expected a GUIAction, got {type(action).__name__}")
    if action.kind not in ACTION_KINDS:
        raise _Malformed(f"unknown action kind {action.kind!r:.40}; valid kinds: {', '.join(ACTION_KINDS)}")
    end = _point(action.x2, action.y2, screen)
    if action.kind == "drag" and end is None:
        raise _Malformed("a drag needs its end point x2, y2")
    if action.text is not None and not isinstance(action.text, str):
        raise _Malformed(f"text must be a string or None, got {type(action.text).__name__}")
    if action.api is not None and not isinstance(action.api, str):
        raise _Malformed(f"api must be a string or None, got {type(action.api).__name__}")
    if action.args is not None and not isinstance(action.args, Mapping):
        raise _Malformed(f"args must be a mapping or None, got {type(action.args).__name__}")
    return _Fields(
        kind=action.kind,
        point=_point(action.x, action.y, screen),
        end=end,
        text=action.text or "",
        keys=_key_set(action.keys),
        direction=(_sign(_number(action.dx)), _sign(_number(action.dy))),
        api=action.api,
        args=dict(action.args or {}),
    )


def _target_box(box: object, kind: str, screen: tuple[int, int]) -> Box | None:
    """The caller's `target_box` checked, corners ordered and clamped onto the screen."""
    if box is None:
        return None
    if REWARD_TABLE[kind] != "point-l1":
        pointers = ", ".join(k for k in ACTION_KINDS if k in POINTER_KINDS)
        raise ValueError(f"target_box applies to pointer targets ({pointers}), not to a {kind} target")
    if isinstance(box, (str, bytes)) or not isinstance(box, Sequence) or len(box) != 4:
        raise ValueError(f"target_box must be (x1, y1, x2, y2) in screen pixels, got {box!r:.60}")
    try:
        if any(v is None for v in box):
            raise _Malformed("a corner is None")
        (x1, y1), (x2, y2) = _point(box[0], box[1], screen), _point(box[2], box[3], screen)
    except _Malformed as exc:
        raise ValueError(f"target_box must be (x1, y1, x2, y2) in screen pixels: {exc}") from None
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def _point(x: object, y: object, screen: tuple[int, int]) -> Point | None:
    """A point clamped onto the screen, or None when both coordinates are None."""
    fx, fy = _number(x), _number(y)
    if fx is None and fy is None:
        return None
    if fx is None or fy is None:
        raise _Malformed("a point needs both coordinates or neither")
    return min(max(fx, 0.0), screen[0] - 1.0), min(max(fy, 0.0), screen[1] - 1.0)


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Malformed(f"a coordinate or scroll amount must be a number, got {value!r:.40}")
    try:
        number = float(value)
    except OverflowError:
        raise _Malformed(f"number {str(value)[:20]}... is out of range") from None
    if not math.isfinite(number):
        raise _Malformed(f"a coordinate or scroll amount must be finite, got {value!r}")
    return number


def _sign(value: float | None) -> int:
    return 0 if not value else (1 if value > 0 else -1)


def _key_set(keys: object) -> frozenset[str]:
    if keys is None:
        return frozenset()
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        raise _Malformed(f"keys must be a list of key names or None, got {type(keys).__name__}")
    names = set()
    for key in keys:
        if not isinstance(key, str):
            raise _Malformed(f"a key name must be a string, got {key!r:.40}")
        try:
            names.add(normalize_key(key))
        except ActionError:  # a name pyautogui does not know (or denies): compared as written
            names.add(key.strip().lower())
    return frozenset(names)
