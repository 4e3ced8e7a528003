"""`parse_action`: any model output text -> `ParsedAction`; model text never raises, bad arguments do."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from verl_cua.actions.formats import FORMAT_REGISTRY, ParseContext, get_format
from verl_cua.actions.geometry import check_marks, check_size
from verl_cua.actions.runtime import run_time_problem
from verl_cua.actions.types import MAX_ACTIONS, ActionError, GUIAction, ParsedAction, invalid, one_line

logger = logging.getLogger(__name__)

MAX_CHARS = 131072


def parse_action(
    text: str,
    *,
    format: str,
    screen: tuple[int, int],
    image: tuple[int, int] | None = None,
    allow_raw_code: bool = False,
    marks: Mapping[int, tuple[int, int]] | None = None,
) -> ParsedAction:
    """Parse one model output in `format` into screen-pixel actions.

    Malformed, truncated or hostile text gives `valid=False` with a one-line `error`; it never raises.
    A bad `format`, `screen` or `image` (caller errors) raises ValueError naming the valid choices.
    `allow_raw_code=True` lets pyautogui code that fails the allow-list through unchecked: only for
    disposable VMs; it is logged every time it is used.
    `marks`: the set-of-marks centres `{n: (x, y)}` (screen pixels) of the observation the model acted on (an env's
    `extra["marks"]`); a point written `tag_n` lands on mark n's centre. Without them `tag_n` is invalid.
    """
    screen = check_size(screen, "screen")
    marks = check_marks(marks)
    if image is not None:
        image = check_size(image, "image")
    fmt_name = format
    fmt = None if format == "auto" else get_format(format)
    text_or_error = _check_text(text)
    if isinstance(text_or_error, ParsedAction):
        text_or_error.format = None if fmt is None else fmt_name
        return text_or_error
    text = text_or_error
    if fmt is None:
        found = [name for name, f in FORMAT_REGISTRY.items() if f.detect(text)]
        if len(found) != 1:
            what = f"ambiguous: matches {', '.join(found)}" if found else "no known format detected"
            return invalid(f"format auto: {what}; pass format= one of {', '.join(sorted(FORMAT_REGISTRY))}")
        fmt_name, fmt = found[0], FORMAT_REGISTRY[found[0]]
    space = dataclasses.replace(fmt.coordinate_space(screen, image), marks=marks)
    ctx = ParseContext(screen=screen, space=space, allow_raw_code=allow_raw_code)
    try:
        result = fmt.parse(text, ctx)
    except ActionError as exc:
        return invalid(str(exc), fmt=fmt_name)
    except (RecursionError, MemoryError):
        return invalid("output is nested too deeply to parse", fmt=fmt_name)
    except Exception as exc:  # a parser bug must not crash training; tests assert this path is never taken
        logger.exception("internal error while parsing %s output", fmt_name)
        return invalid(f"internal parser error ({type(exc).__name__}): {exc}", fmt=fmt_name)
    if result.code is None and not result.actions:
        return invalid("output contains no action", fmt=fmt_name, thought=result.thought)
    if len(result.actions) > MAX_ACTIONS:
        return invalid(f"output has {len(result.actions)} actions; at most {MAX_ACTIONS}", fmt=fmt_name)
    problem = _check_actions(result.actions) or run_time_problem(result.actions)
    if problem:
        return invalid(problem, fmt=fmt_name, thought=result.thought)
    note = one_line("; ".join(dict.fromkeys(ctx.notes))) if ctx.notes else None
    return ParsedAction(
        valid=True, error=note, actions=result.actions, thought=result.thought, format=fmt_name, code=result.code
    )


def _check_actions(actions: list[GUIAction]) -> str | None:
    """Invariants every format's actions must meet before they may reach a desktop."""
    for i, a in enumerate(actions):
        if a.kind in ("done", "fail") and i != len(actions) - 1:
            return "done/fail must be the last action of an output"
        if a.kind == "scroll" and not (a.dx or a.dy):
            return "scroll by 0 does nothing"
        if a.text is not None and not a.text.isascii():
            try:
                a.text.encode("utf-8")
            except UnicodeEncodeError:
                return "text contains a lone surrogate (not valid UTF-8)"
    return None


def _check_text(text: object) -> str | ParsedAction:
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            return invalid(f"output is not valid UTF-8 (byte {exc.start})")
    if not isinstance(text, str):
        return invalid(f"output must be text, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        return invalid(f"output is {len(text)} characters; at most {MAX_CHARS}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return invalid(f"output is not valid UTF-8 (lone surrogate at char {exc.start})")
    if not text.strip():
        return invalid("empty output")
    return text
