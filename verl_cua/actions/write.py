"""`render_action`: screen-pixel actions -> the text a model in `format` writes; the inverse of `parse_action`."""

from __future__ import annotations

from verl_cua.actions.formats import describe, get_format
from verl_cua.actions.geometry import CoordinateSpace, check_size
from verl_cua.actions.keys import normalize_key
from verl_cua.actions.parse import parse_action
from verl_cua.actions.types import ACTION_KINDS, MAX_ACTIONS, POINTER_KINDS, TERMINAL_KINDS, ActionError, GUIAction


def render_action(
    actions: list[GUIAction],
    *,
    format: str,
    screen: tuple[int, int],
    image: tuple[int, int] | None = None,
    thought: str | None = None,
) -> str:
    """Model text in `format` that `parse_action` reads back as `actions` (up to coordinate quantisation).

    Raises ActionError, naming the format and the action, when `format` cannot express an action; the
    output is parsed before it is returned, so text that would read back differently is never returned.
    """
    screen = check_size(screen, "screen")
    if image is not None:
        image = check_size(image, "image")
    fmt = get_format(format)
    if not callable(getattr(fmt, "render", None)):
        raise ActionError(f"{format}: this format has no writer")
    _check_actions(format, actions, screen)
    if thought is not None and not isinstance(thought, str):
        raise ValueError(f"thought must be a string or None, got {type(thought).__name__}")
    thought = (thought or "").strip() or None
    space = fmt.coordinate_space(screen, image)
    text = fmt.render(actions, space, thought)
    parsed = parse_action(text, format=format, screen=screen, image=image)
    if not parsed.valid or parsed.code is not None:
        raise ActionError(f"{format}: the written text does not parse back ({parsed.error})")
    if parsed.error:
        raise ActionError(f"{format}: the written text parses only with a note ({parsed.error})")
    problem = round_trip_problem(actions, parsed.actions, space)
    if problem:
        raise ActionError(f"{format} cannot express these actions as given: {problem}")
    expected = fmt.expected_thought(actions, thought) if hasattr(fmt, "expected_thought") else thought
    if parsed.thought != expected:
        raise ActionError(f"{format}: the thought does not read back unchanged ({parsed.thought!r:.60})")
    return text


def round_trip_problem(wanted: list[GUIAction], got: list[GUIAction], space: CoordinateSpace) -> str | None:
    """Why `got` differs from `wanted` beyond `space`'s pixel tolerance, or None when they match."""
    if len(got) != len(wanted):
        return f"{len(wanted)} actions read back as {len(got)}: {', '.join(describe(a) for a in got)[:120]}"
    tol_x, tol_y = space.pixel_tolerance
    for i, (a, b) in enumerate(zip(wanted, got, strict=True), 1):
        same = (
            a.kind == b.kind
            and a.text == b.text
            and a.keys == b.keys
            and (a.dx or 0) == (b.dx or 0)
            and (a.dy or 0) == (b.dy or 0)
            and _near(a.x, b.x, tol_x)
            and _near(a.y, b.y, tol_y)
            and _near(a.x2, b.x2, tol_x)
            and _near(a.y2, b.y2, tol_y)
        )
        if not same:
            return f"action {i} {describe(a)} reads back as {describe(b)}"
    return None


def _near(a: int | None, b: int | None, tolerance: int) -> bool:
    return a == b if a is None or b is None else abs(a - b) <= tolerance


def _check_actions(fmt: str, actions: object, screen: tuple[int, int]) -> None:
    """What every format needs of its input: well-formed actions in screen pixels."""
    if not isinstance(actions, list) or not actions:
        raise ActionError(f"{fmt}: nothing to write (actions must be a non-empty list of GUIAction)")
    if len(actions) > MAX_ACTIONS:
        raise ActionError(f"{fmt}: {len(actions)} actions; at most {MAX_ACTIONS} per output")
    for i, a in enumerate(actions):
        if not isinstance(a, GUIAction) or a.kind not in ACTION_KINDS:
            raise ActionError(f"{fmt}: item {i + 1} is not a GUIAction of a known kind: {a!r:.60}")
        if a.kind in TERMINAL_KINDS and i != len(actions) - 1:
            raise ActionError(f"{fmt}: {describe(a)} must be the last action")
        if a.kind == "api" and fmt != "api_gui":
            raise ActionError(f"{fmt} cannot express {a.api}(...): app APIs exist only in the api_gui format")
        problem = _problem(a, screen)
        if problem:
            raise ActionError(f"{fmt} cannot express {describe(a)}: {problem}")


def _problem(a: GUIAction, screen: tuple[int, int]) -> str | None:
    points = [(a.x, a.y)] + ([(a.x2, a.y2)] if a.kind == "drag" else [])
    for x, y in points:
        if (x is None) != (y is None):
            return "x and y must both be set or both be None"
        if x is not None and not all(isinstance(v, int) and not isinstance(v, bool) for v in (x, y)):
            return "coordinates must be integer screen pixels"
        if x is not None and not (0 <= x < screen[0] and 0 <= y < screen[1]):
            return f"({x}, {y}) is outside the {screen[0]}x{screen[1]} screen"
    if a.kind == "move" and a.x is None:
        return "a move needs a target point"
    if a.kind == "drag" and a.x2 is None:
        return "a drag needs an end point (x2, y2)"
    if a.kind == "scroll":
        amounts = [v for v in (a.dx, a.dy) if v]
        if any(isinstance(v, bool) or not isinstance(v, int) for v in amounts) or len(amounts) != 1:
            return "a scroll needs one non-zero integer amount on one axis (split a diagonal scroll in two)"
    if a.kind == "type" and not isinstance(a.text, str):
        return "type needs text"
    if a.kind == "key":
        return _key_problem(a.keys)
    if a.kind not in POINTER_KINDS | {"drag", "scroll"} and a.x is not None:
        return "this kind takes no coordinates"
    return None


def _key_problem(keys: object) -> str | None:
    if not isinstance(keys, list) or not keys:
        return "key needs a non-empty list of key names"
    for key in keys:
        try:
            canonical = normalize_key(key)
        except ActionError as exc:
            return str(exc)
        if canonical != key:
            return f"key {key!r} is spelled {canonical!r} in pyautogui names"
    return None
