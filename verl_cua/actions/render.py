"""Render actions for OSWorld: `pyautogui` code built from an allow-list (never from model text) and `computer_13`."""

from __future__ import annotations

from verl_cua.actions.keys import VALID_KEYS
from verl_cua.actions.types import TERMINAL_KINDS, GUIAction

WAIT_SECONDS = 1.0
DRAG_SECONDS = 0.5
_PYAUTOGUI_CLICK = {
    "click": "click",
    "double_click": "doubleClick",
    "triple_click": "tripleClick",
    "right_click": "rightClick",
    "middle_click": "middleClick",
    "move": "moveTo",
}


def render_pyautogui(actions: list[GUIAction]) -> str:
    """Code for the executable actions; the bare word `WAIT`/`DONE`/`FAIL` when nothing else is left.

    A trailing `done`/`fail` is not code: callers read it from `ParsedAction.terminal`.
    """
    body = [a for a in actions if a.kind not in TERMINAL_KINDS]
    if not body:
        return "FAIL" if actions and actions[-1].kind == "fail" else "DONE" if actions else "WAIT"
    if len(body) == 1 and body[0].kind == "wait":
        return "WAIT"
    return "\n".join(line for a in body for line in _pyautogui_lines(a))


def _xy(a: GUIAction) -> str:
    return f"{int(a.x)}, {int(a.y)}" if a.x is not None else ""


def _pyautogui_lines(a: GUIAction) -> list[str]:
    if a.kind in _PYAUTOGUI_CLICK:
        return [f"pyautogui.{_PYAUTOGUI_CLICK[a.kind]}({_xy(a)})"]
    if a.kind == "drag":
        lines = [f"pyautogui.moveTo({_xy(a)})"] if a.x is not None else []
        return lines + [f"pyautogui.dragTo({int(a.x2)}, {int(a.y2)}, duration={DRAG_SECONDS}, button='left')"]
    if a.kind == "scroll":
        at = f", x={int(a.x)}, y={int(a.y)}" if a.x is not None else ""
        lines = []
        if a.dy:
            lines.append(f"pyautogui.scroll({int(a.dy)}{at})")
        if a.dx:
            lines.append(f"pyautogui.hscroll({int(a.dx)}{at})")
        return lines
    if a.kind == "type":
        return [f"pyautogui.write({str(a.text)!r})"]
    if a.kind == "key":
        keys = [k for k in a.keys or [] if k in VALID_KEYS]
        if len(keys) != len(a.keys or []) or not keys:
            raise ValueError(f"cannot render key action with keys {a.keys!r}")
        if len(keys) == 1:
            return [f"pyautogui.press({keys[0]!r})"]
        return [f"pyautogui.hotkey({', '.join(repr(k) for k in keys)})"]
    if a.kind == "wait":
        return [f"time.sleep({WAIT_SECONDS})"]
    raise ValueError(f"cannot render action kind {a.kind!r}")


def render_computer13(actions: list[GUIAction]) -> list[dict]:
    """OSWorld `computer_13` dicts. Terminal kinds become `{"action_type": "DONE"|"FAIL"}`; note that
    `DesktopEnv.step` only ends the episode on the bare strings, which the env layer passes instead."""
    out: list[dict] = []
    for a in actions:
        out.extend(_computer13(a))
    return out


def _at(a: GUIAction) -> dict:
    return {"x": int(a.x), "y": int(a.y)} if a.x is not None else {}


def _computer13(a: GUIAction) -> list[dict]:
    kind = a.kind
    if kind == "click":
        return [{"action_type": "CLICK", "parameters": {"button": "left", **_at(a), "num_clicks": 1}}]
    if kind == "double_click":
        return [{"action_type": "DOUBLE_CLICK", "parameters": _at(a)}]
    if kind == "triple_click":
        return [{"action_type": "CLICK", "parameters": {"button": "left", **_at(a), "num_clicks": 3}}]
    if kind == "right_click":
        return [{"action_type": "RIGHT_CLICK", "parameters": _at(a)}]
    if kind == "middle_click":
        return [{"action_type": "CLICK", "parameters": {"button": "middle", **_at(a), "num_clicks": 1}}]
    if kind == "move":
        return [{"action_type": "MOVE_TO", "parameters": _at(a)}]
    if kind == "drag":
        start = [{"action_type": "MOVE_TO", "parameters": _at(a)}] if a.x is not None else []
        return start + [{"action_type": "DRAG_TO", "parameters": {"x": int(a.x2), "y": int(a.y2)}}]
    if kind == "scroll":
        start = [{"action_type": "MOVE_TO", "parameters": _at(a)}] if a.x is not None else []
        params = {k: int(v) for k, v in (("dx", a.dx), ("dy", a.dy)) if v}
        return start + [{"action_type": "SCROLL", "parameters": params}] if params else start
    if kind == "type":
        return [{"action_type": "TYPING", "parameters": {"text": a.text}}]
    if kind == "key":
        keys = list(a.keys or [])
        if len(keys) == 1:
            return [{"action_type": "PRESS", "parameters": {"key": keys[0]}}]
        return [{"action_type": "HOTKEY", "parameters": {"keys": keys}}]
    if kind in ("wait", "done", "fail"):
        return [{"action_type": kind.upper()}]
    raise ValueError(f"cannot render action kind {kind!r}")
