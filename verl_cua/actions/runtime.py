"""How long one model output takes to run on a desktop, bounded when it is parsed.

A valid output can still be slow: 64 `wait`s, or one `write` of 100,000 characters, runs for minutes. Such an output
would run past the env's action timeout on a healthy desktop, so its run time is estimated from what pyautogui does
(a pause after each call, a wait's or a drag's fixed time, a cost per typed character and per scroll click: each is
a press and a release with an X round trip) and an output over
`MAX_RUN_SECONDS` is invalid, with a one-line reason, before anything reaches a desktop.
"""

from __future__ import annotations

from verl_cua.actions.types import GUIAction

MAX_RUN_SECONDS = 15.0  # per output: half the local desktop's 30 s action timeout
CALL_SECONDS = 0.1  # pyautogui.PAUSE, slept after each pyautogui call
CHAR_SECONDS = 0.002  # one typed character (key events and the X round trips; measured at ~1 ms on a quiet host)
FIXED_SECONDS = {"wait": 1.0, "drag": 0.5}  # render.WAIT_SECONDS, render.DRAG_SECONDS


def run_seconds(actions: list[GUIAction]) -> float:
    """The estimated seconds `actions` take to run on a desktop (their pauses, waits, drags and typing)."""
    total = 0.0
    for action in actions:
        if action.kind in ("done", "fail"):
            continue
        total += CALL_SECONDS + FIXED_SECONDS.get(action.kind, 0.0)
        if action.kind == "type" and action.text:
            total += CHAR_SECONDS * len(action.text)
        if action.kind == "scroll":
            total += CHAR_SECONDS * (abs(action.dx or 0) + abs(action.dy or 0))
    return total


def run_time_problem(actions: list[GUIAction]) -> str | None:
    """Why `actions` would run too long (one line), or None when they fit in `MAX_RUN_SECONDS`."""
    seconds = run_seconds(actions)
    if seconds <= MAX_RUN_SECONDS:
        return None
    waits = sum(a.kind == "wait" for a in actions)
    typed = sum(len(a.text or "") for a in actions if a.kind == "type")
    clicks = sum(abs(a.dx or 0) + abs(a.dy or 0) for a in actions if a.kind == "scroll")
    return (
        f"output would run for about {seconds:.0f} s ({waits} waits, {typed} characters typed, {clicks} scroll "
        f"clicks); at most "
        f"{MAX_RUN_SECONDS:g} s per output: split it over several steps"
    )
