"""Actions drawn over a screenshot: one-line summaries and SVG overlay shapes in the `screen` pixel space."""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

COLOURS = {
    "click": "#ff2d95",
    "move": "#ff2d95",
    "double_click": "#a259ff",
    "triple_click": "#a259ff",
    "right_click": "#1e9bff",
    "middle_click": "#1e9bff",
    "drag": "#ff8a00",
    "scroll": "#00c2a8",
}
RINGS = {"double_click": 2, "triple_click": 3}
LABEL_CHARS = 48
SHAPE_ATTRS = 'vector-effect="non-scaling-stroke" fill="none" stroke-linecap="round"'


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> str:
    number = _num(value)
    if number is None:
        return "?"
    return str(int(round(number))) if abs(number) < 1e9 else f"{number:.3g}"


def _quoted(text: Any, limit: int | None = None) -> str:
    text = "" if text is None else str(text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def describe(action: dict[str, Any], limit: int | None = None) -> str:
    """One action as short text: `click(960, 540)`, `type("hi")`, `key(ctrl+s)`, `drag(10, 10 → 200, 300)`."""
    kind = str(action.get("kind"))
    x, y = action.get("x"), action.get("y")
    at = f"{_int(x)}, {_int(y)}" if x is not None else ""
    if kind == "drag":
        start = f"{at} " if at else ""
        return f"drag({start}→ {_int(action.get('x2'))}, {_int(action.get('y2'))})"
    if kind == "scroll":
        dx, dy = _num(action.get("dx")) or 0, _num(action.get("dy")) or 0
        parts = [f"{'up' if dy > 0 else 'down'} {abs(dy):g}"] if dy else []
        parts += [f"{'right' if dx > 0 else 'left'} {abs(dx):g}"] if dx else []
        where = f" @ {at}" if at else ""
        return f"scroll({', '.join(parts) or '0'}{where})"
    if kind == "type":
        return f"type({_quoted(action.get('text'), limit)})"
    if kind == "key":
        return f"key({'+'.join(str(k) for k in action.get('keys') or [])})"
    if kind == "api":  # api_gui's app API call: `CalcTools.set_cell_value(cell="B7", value="=SUM(B2:B6)")`
        args = action.get("args") if isinstance(action.get("args"), dict) else {}
        shown = ", ".join(f"{k}={_quoted(v, limit) if isinstance(v, str) else v}" for k, v in args.items())
        return f"{action.get('api')}({shown})"
    if kind in ("done", "fail", "wait"):
        text = action.get("text")
        return f"{kind}({_quoted(text, limit) if text else ''})"
    return f"{kind}({at})"


def step_actions(step: dict[str, Any]) -> list[dict[str, Any]]:
    """The action dicts of a step line (whatever else a malformed line holds is left out)."""
    action = step.get("action")
    actions = action.get("actions") if isinstance(action, dict) else None
    return [a for a in actions if isinstance(a, dict)] if isinstance(actions, list) else []


def describe_step(step: dict[str, Any], limit: int | None = None) -> str:
    """A step's actions joined by `; `, or `(no action)` / `(raw code)`."""
    action = step.get("action") if isinstance(step.get("action"), dict) else {}
    actions = step_actions(step)
    if actions:
        return "; ".join(describe(a, limit) for a in actions)
    return "(raw code)" if action.get("code") else "(no action)"


def move_cursor(actions: list[dict[str, Any]], cursor: tuple[float, float] | None) -> tuple[float, float] | None:
    """The pointer position after `actions`, starting from `cursor` (None: unknown)."""
    for action in actions:
        x, y = _num(action.get("x")), _num(action.get("y"))
        if action.get("kind") == "drag":
            x2, y2 = _num(action.get("x2")), _num(action.get("y2"))
            if x2 is not None and y2 is not None:
                cursor = (x2, y2)
        elif x is not None and y is not None and action.get("kind") in COLOURS:
            cursor = (x, y)
    return cursor


def _pair(shape: str) -> str:
    """The shape twice: a dark halo for contrast on any screenshot, then the coloured stroke on top."""
    return shape.replace("PAINT", 'stroke="#000" stroke-opacity="0.55" stroke-width="5"') + shape.replace(
        "PAINT", 'stroke="COLOUR" stroke-width="2.5"'
    )


def _ring(x: float, y: float, r: float, kind: str) -> str:
    shapes = []
    for i in range(RINGS.get(kind, 1)):
        shapes.append(f'<circle class="ov-ring" cx="{x:g}" cy="{y:g}" r="{r * (1 + 0.45 * i):g}" {SHAPE_ATTRS} PAINT/>')
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        x1, y1, x2, y2 = x + dx * r * 0.45, y + dy * r * 0.45, x + dx * r * 1.9, y + dy * r * 1.9
        if RINGS.get(kind, 1) > 1:
            x1, y1 = x + dx * r * (1 + 0.45 * (RINGS[kind] - 1)), y + dy * r * (1 + 0.45 * (RINGS[kind] - 1))
            x2, y2 = x1 + dx * r * 0.9, y1 + dy * r * 0.9
        shapes.append(f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" {SHAPE_ATTRS} PAINT/>')
    return _pair("".join(shapes))


def _arrow(x1: float, y1: float, x2: float, y2: float, head: float) -> str:
    angle = math.atan2(y2 - y1, x2 - x1)
    points = [(x2, y2)]
    for side in (-1, 1):
        a = angle + math.pi + side * 0.45
        points.append((x2 + head * math.cos(a), y2 + head * math.sin(a)))
    corners = " ".join(f"{px:g},{py:g}" for px, py in points)
    line = f'<line class="ov-line" x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" {SHAPE_ATTRS} PAINT/>'
    return _pair(line) + f'<polygon class="ov-head" points="{corners}" fill="COLOUR" stroke="#000" stroke-width="1"/>'


def _label(x: float, y: float, w: float, h: float, text: str, colour: str) -> str:
    left, top = min(max(x / w * 100, 0), 100), min(max(y / h * 100, 0), 100)
    side = " ov-left" if left > 62 else ""
    below = " ov-below" if top < 12 else ""
    style = f"left:{left:.3f}%;top:{top:.3f}%;border-color:{colour}"
    return f'<div class="ov-label{side}{below}" style="{style}">{escape(text)}</div>'


def overlay(actions: list[dict[str, Any]], screen: tuple[int, int], cursor: tuple[float, float] | None = None) -> str:
    """HTML for the overlay of one step: an SVG (viewBox = the screen) with the shapes, then HTML labels."""
    w, h = screen
    unit = max(w, h) / 100
    shapes, labels, banner = [], [], []
    numbered = sum(a.get("kind") in COLOURS for a in actions) > 1
    n = 0
    for action in actions:
        kind = str(action.get("kind"))
        x, y = _num(action.get("x")), _num(action.get("y"))
        colour = COLOURS.get(kind)
        text = describe(action, LABEL_CHARS)
        if colour is None:
            banner.append(text)
            cursor = move_cursor([action], cursor)
            continue
        n += 1
        text = f"{n}. {text}" if numbered else text
        shape = ""
        if kind == "drag":
            x2, y2 = _num(action.get("x2")), _num(action.get("y2"))
            start = (x, y) if x is not None and y is not None else cursor
            if x2 is not None and y2 is not None:
                if start is not None:
                    dot = f'<circle cx="{start[0]:g}" cy="{start[1]:g}" r="{unit * 0.6:g}" {SHAPE_ATTRS} PAINT/>'
                    shape = _pair(dot) + _arrow(start[0], start[1], x2, y2, unit * 2.2)
                else:
                    shape = _ring(x2, y2, unit, kind)
                labels.append(_label(x2, y2, w, h, text, colour))
            else:
                banner.append(text)
        elif kind == "scroll":
            px, py = (x, y) if x is not None and y is not None else (cursor or (w / 2, h / 2))
            dx, dy = _num(action.get("dx")) or 0, _num(action.get("dy")) or 0
            shape = _pair(f'<circle cx="{px:g}" cy="{py:g}" r="{unit * 0.6:g}" {SHAPE_ATTRS} PAINT/>')
            if dx or dy:
                norm = math.hypot(dx, dy)
                tip = (px + dx / norm * unit * 8, py - dy / norm * unit * 8)
                shape += _arrow(px, py, tip[0], tip[1], unit * 2.2)
            labels.append(_label(px, py, w, h, text, colour))
        elif x is not None and y is not None:
            shape = _ring(x, y, unit * 1.3, kind)
            labels.append(_label(x, y, w, h, text, colour))
        else:
            banner.append(text)
        if shape:
            shapes.append(f'<g class="ov-{kind}">{shape.replace("COLOUR", colour)}</g>')
        cursor = move_cursor([action], cursor)
    svg = (
        f'<svg class="overlay" viewBox="0 0 {w} {h}" preserveAspectRatio="none" '
        f'xmlns="http://www.w3.org/2000/svg" aria-hidden="true">{"".join(shapes)}</svg>'
    )
    top = f'<div class="ov-banner">{escape("; ".join(banner))}</div>' if banner else ""
    return svg + "".join(labels) + top
