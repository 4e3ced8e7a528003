"""ComputerRL's API-GUI format: `<think>...</think>` then one ```python line calling a GUI primitive of `Agent` or
an app API (`CalcTools.set_cell_value(cell="B7", value="=SUM(B2:B6)")`).

The line is parsed with `ast` and never executed: it must be one call `Tool.method(...)` with literal arguments;
`Agent`'s GUI primitives become GUI actions in screen pixels, everything else resolves to a registered API spec
(`verl_cua.actions.apis`) whose parameters check each argument, and becomes one `api` action.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Mapping
from typing import Any

from verl_cua.actions.apis import apis_for, lookup_api
from verl_cua.actions.formats.base import BaseFormat, FormatResult, ParseContext, cannot, register_format
from verl_cua.actions.geometry import CoordinateSpace, Mark
from verl_cua.actions.keys import normalize_chord
from verl_cua.actions.safety import literal_value, parse_code
from verl_cua.actions.types import ActionError, GUIAction

SCROLL_CLICKS = 5  # Agent.scroll names a direction, not an amount: wheel clicks per call
AGENT = "Agent"
# Agent's GUI primitives: parameter names by position (ComputerRL's signatures)
PRIMITIVES: dict[str, tuple[str, ...]] = {
    "click": ("coordinates", "num_clicks", "button_type"),
    "type": ("coordinates", "text", "overwrite", "enter"),
    "drag_and_drop": ("drag_from_coordinates", "drop_on_coordinates"),
    "scroll": ("coordinates", "direction"),
    "hotkey": ("keys",),
    "wait": (),
    "exit": ("success",),
}
_CLICKS = {("left", 1): "click", ("left", 2): "double_click", ("left", 3): "triple_click", ("right", 1): "right_click"}
_CLICKS[("middle", 1)] = "middle_click"
_CLICK_CALLS = {kind: key for key, kind in _CLICKS.items()}
_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_FENCE_INLINE = re.compile(r"[A-Z][A-Za-z]*\.[a-z_]+\s*\(.*\)\s*")
API_GUI_CALL = re.compile(r"\b(?:Agent|[A-Z][A-Za-z]*Tools)\.[a-z_]+\s*\(")  # Agent.click( / CalcTools.x(


@register_format("api_gui")
class APIGUIFormat(BaseFormat):
    """One line of code per turn: `Agent.click(coordinates=[x, y])` or `CalcTools.sort_column(...)`; screen pixels."""

    name = "api_gui"
    mark_example = "Agent.click(coordinates=tag_3)"  # a point named by its set-of-marks mark

    def detect(self, text: str) -> bool:
        """A call on `Agent` or a tool class (`CalcTools.`); pyautogui code is not this format."""
        if "pyautogui." in text:
            return False
        return API_GUI_CALL.search(text) is not None

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """Screen pixels, as ComputerRL's primitives compile to pyautogui; `image` is not used."""
        return CoordinateSpace(screen[0], screen[1], screen[0], screen[1])

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """The one call of the output's code line; the `<think>` text and any prose are the thought."""
        line, thought = split_output(text)
        return FormatResult(actions=call_to_actions(line, ctx), thought=thought)

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """`<think>thought</think>` and a ```python block with the one call these actions are; ActionError if none."""
        line = actions_to_call(actions)
        thought = (thought or "").replace("<think>", "").replace("</think>", "").replace("```", "").strip()
        head = f"<think>{thought}</think>\n" if thought else ""
        return f"{head}```python\n{line}\n```"

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, None]:
        """ComputerRL's prompt: the GUI primitives, the desktop APIs (the app APIs come each turn), one call a turn."""
        width, height = size
        desktop = "\n".join(f"  {a.signature()}" for a in apis_for(None))
        system = (
            "You are an agent that carries out tasks on a Linux desktop. Each turn you get a screenshot of the "
            f"{width}x{height} screen, the app that has the focus and the APIs it offers.\n"
            "Reply with your plan and reasoning in <think>...</think>, then ONE line of Python in a ```python block "
            "that calls exactly one method, with keyword arguments and literal values (no variables carry over):\n"
            "GUI primitives (coordinates are screen pixels [x, y] read from the screenshot):\n"
            "  Agent.click(coordinates=[x, y], num_clicks=1, button_type='left')\n"
            "  Agent.type(coordinates=None, text='', overwrite=False, enter=False)  # overwrite: select all first\n"
            "  Agent.drag_and_drop(drag_from_coordinates=[x, y], drop_on_coordinates=[x, y])\n"
            f"  Agent.scroll(coordinates=[x, y], direction='up')  # or 'down'; {SCROLL_CLICKS} wheel clicks\n"
            "  Agent.hotkey(keys=['ctrl', 's'])\n"
            "  Agent.wait()\n"
            "  Agent.exit(success=True)  # the task is done; success=False: it cannot be done\n"
            f"Desktop APIs:\n{desktop}\n"
            "App APIs are listed each turn for the focused app, e.g. CalcTools.set_cell_value(cell='B7', "
            "value='=SUM(B2:B6)'); their results come back in the next turn. Prefer an app API over many GUI steps."
        )
        return system, None

    def turn_context(self, extra: Mapping[str, Any] | None) -> str | None:
        """The focused app, the APIs it offers now and the last API call's result (from an observation's `extra`:
        `focused_app`, `api_result`)."""
        extra = extra or {}
        app = extra.get("focused_app")
        apis = [a for a in apis_for(app) if a.tool != AGENT]
        lines = [f"Focused app: {app or 'none'}."]
        if apis:
            lines += ["APIs you can call now:", *(f"  {a.signature()}" for a in apis)]
        result = extra.get("api_result")
        if result is not None:
            lines.append(f"Result of your last API call: {result}")
        return "\n".join(lines)

    def longest_turn_context(self) -> str:
        """The app with the most APIs, with a result at its cap."""
        from verl_cua.actions.apis import MAX_RESULT_CHARS, TOOLSET_REGISTRY, load_builtin_toolsets

        load_builtin_toolsets()
        result = "x" * MAX_RESULT_CHARS
        apps = [toolset.app for toolset in TOOLSET_REGISTRY.values()]
        texts = [self.turn_context({"focused_app": app, "api_result": result}) or "" for app in apps]
        return max(texts, key=len)


def split_output(text: str) -> tuple[str, str | None]:
    """(the code line, the thought). The code runs from the first ``` to the last one, so a string argument may hold
    backticks; with no fence the text outside `<think>` is the code. The prose and `<think>` text are the thought."""
    first = text.find("```")
    if first < 0:
        prose, code = "", text
    else:
        last = text.rfind("```")
        if last == first:
            raise ActionError("unterminated ``` code block (output truncated?)")
        info, _, code = text[first + 3 : last].partition("\n")
        lang = info.strip()
        if lang.lower() not in ("", "python", "py", "python3"):
            if _FENCE_INLINE.fullmatch(lang):  # ```Agent.wait()``` on one line
                code = lang
            else:
                raise ActionError(f"code block in {lang.split()[0]!r:.20} is not allowed (only python)")
        prose = [text[:first], text[last + 3 :]]
    if first < 0:
        thoughts = [m.group(1).strip() for m in _THINK.finditer(code)]
        code = _THINK.sub("", code)
        if "<think>" in code:
            raise ActionError("unterminated <think> block (output truncated?)")
    else:
        thoughts = [m.group(1).strip() for part in prose for m in _THINK.finditer(part)]
        thoughts += [_THINK.sub("", part).strip() for part in prose]
    return code.strip(), "\n".join(t for t in thoughts if t) or None


def call_to_actions(code: str, ctx: ParseContext) -> list[GUIAction]:
    """One `Tool.method(literal args)` statement -> its actions; anything else is an ActionError naming it."""
    if not code:
        raise ActionError("no code: api_gui wants one ```python line calling Agent or an app API")
    tree = parse_code(code)
    calls = [s for s in tree.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(calls) != 1:
        raise ActionError(f"{len(calls)} statements; api_gui takes exactly one call per turn")
    stmt = calls[0]
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        raise ActionError(f"{type(stmt).__name__.lower()} is not allowed (only one call like Agent.click(...))")
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        raise ActionError("only calls of the form Tool.method(...) are allowed, e.g. Agent.click(coordinates=[x, y])")
    args = [literal_value(a, call.lineno) for a in call.args]
    kwargs = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise ActionError("**kwargs is not allowed")
        kwargs[kw.arg] = literal_value(kw.value, call.lineno)
    tool, method = func.value.id, func.attr
    if tool == AGENT and method in PRIMITIVES:
        return primitive_actions(method, _bind(method, args, kwargs), ctx)
    if tool == AGENT and method not in lookup_agent_methods():
        close = difflib.get_close_matches(method, lookup_agent_methods(), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"valid: {', '.join(lookup_agent_methods())}"
        raise ActionError(f"Agent has no method {method!r:.40}; {hint}")
    spec = lookup_api(tool, method)
    return [GUIAction("api", api=spec.qualname, args=spec.bind(args, kwargs))]


def lookup_agent_methods() -> list[str]:
    """Agent's GUI primitives and desktop APIs, by name."""
    return [*PRIMITIVES, *(a.name for a in apis_for(None) if a.tool == AGENT)]


def _bind(method: str, args: list, kwargs: dict) -> dict:
    names = PRIMITIVES[method]
    if len(args) > len(names):
        raise ActionError(f"Agent.{method} takes at most {len(names)} arguments, got {len(args)}")
    bound = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            why = "twice" if key in bound else f"is not a parameter; valid: {', '.join(names) or 'none'}"
            raise ActionError(f"Agent.{method}: {key!r:.40} {why}")
        bound[key] = value
    return bound


def primitive_actions(method: str, a: dict, ctx: ParseContext) -> list[GUIAction]:
    """An `Agent` GUI primitive's bound arguments -> GUI actions in screen pixels."""
    if method == "click":
        clicks = _int(a.get("num_clicks", 1), "num_clicks")
        button = a.get("button_type", "left")
        kind = _CLICKS.get((button, clicks))
        if kind is None:
            raise ActionError(f"Agent.click: {clicks} clicks of button_type={button!r:.20} is not supported")
        return [GUIAction(kind, *_point(a, "coordinates", ctx))]
    if method == "type":
        text = a.get("text", "")
        if not isinstance(text, str):
            raise ActionError("Agent.type: text must be a string")
        out = [GUIAction("click", *_point(a, "coordinates", ctx))] if a.get("coordinates") is not None else []
        if _flag(a, "overwrite"):
            out.append(GUIAction("key", keys=["ctrl", "a"]))
        if text:
            out.append(GUIAction("type", text=text))
        if _flag(a, "enter"):
            out.append(GUIAction("key", keys=["enter"]))
        if not out:
            raise ActionError("Agent.type with no text, no coordinates and no enter does nothing")
        return out
    if method == "drag_and_drop":
        x, y = _point(a, "drag_from_coordinates", ctx)
        x2, y2 = _point(a, "drop_on_coordinates", ctx)
        return [GUIAction("drag", x=x, y=y, x2=x2, y2=y2)]
    if method == "scroll":
        direction = a.get("direction", "up")
        if direction not in ("up", "down"):
            raise ActionError(f"Agent.scroll: direction={direction!r:.20}; valid: 'up', 'down'")
        x, y = _point(a, "coordinates", ctx)
        return [GUIAction("scroll", x=x, y=y, dy=SCROLL_CLICKS if direction == "up" else -SCROLL_CLICKS)]
    if method == "hotkey":
        if "keys" not in a:
            raise ActionError("Agent.hotkey needs keys, e.g. keys=['ctrl', 's']")
        return [GUIAction("key", keys=normalize_chord(a["keys"]))]
    if method == "wait":
        return [GUIAction("wait")]
    success = a.get("success", True)
    if not isinstance(success, bool):
        raise ActionError("Agent.exit: success must be True or False")
    return [GUIAction("done" if success else "fail")]


def _point(a: dict, name: str, ctx: ParseContext) -> tuple[int, int]:
    value = a.get(name)
    if isinstance(value, Mark):  # coordinates=tag_3: set-of-marks mark 3's centre
        return ctx.space.mark(value.number)
    if not (isinstance(value, list) and len(value) == 2 and all(_number(v) for v in value)):
        raise ActionError(f"{name} must be [x, y] screen pixels, got {value!r:.40}")
    return ctx.space.to_screen(value[0], value[1], ctx.notes)


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v: object, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ActionError(f"{name} must be an integer, got {v!r:.20}")
    return v


def _flag(a: dict, name: str) -> bool:
    value = a.get(name, False)
    if not isinstance(value, bool):
        raise ActionError(f"Agent.type: {name} must be True or False")
    return value


def actions_to_call(actions: list[GUIAction]) -> str:
    """The one api_gui call that `actions` are; ActionError (naming the action) for what one call cannot say."""
    if not actions:
        raise ActionError("api_gui cannot express an empty action list")
    typed = _as_type_call(actions)
    if typed is not None:
        return typed
    if len(actions) > 1:
        raise cannot("api_gui", actions[1], "api_gui takes one call per turn")
    a = actions[0]
    if a.kind in _CLICK_CALLS:
        button, clicks = _CLICK_CALLS[a.kind]
        if a.x is None:
            raise cannot("api_gui", a, "Agent.click needs coordinates")
        extra = f", num_clicks={clicks}" if clicks != 1 else ""
        extra += f", button_type={button!r}" if button != "left" else ""
        return f"Agent.click(coordinates=[{a.x}, {a.y}]{extra})"
    if a.kind == "drag" and a.x is not None:
        return f"Agent.drag_and_drop(drag_from_coordinates=[{a.x}, {a.y}], drop_on_coordinates=[{a.x2}, {a.y2}])"
    if a.kind == "scroll" and a.x is not None and not a.dx and a.dy in (SCROLL_CLICKS, -SCROLL_CLICKS):
        return f"Agent.scroll(coordinates=[{a.x}, {a.y}], direction={'up' if a.dy > 0 else 'down'!r})"
    if a.kind == "key":
        return f"Agent.hotkey(keys={list(a.keys or [])!r})"
    if a.kind == "wait":
        return "Agent.wait()"
    if a.kind in ("done", "fail"):
        return f"Agent.exit(success={a.kind == 'done'})"
    if a.kind == "api" and a.api:
        tool, _, method = a.api.partition(".")
        spec = lookup_api(tool, method)
        args = spec.bind([], dict(a.args or {}))
        return f"{a.api}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
    reasons = {
        "move": "it has no move",
        "drag": "a drag needs its start",
        "scroll": f"it scrolls {SCROLL_CLICKS} clicks up or down at a point",
    }
    raise cannot("api_gui", a, reasons.get(a.kind, "no Agent primitive says it"))


def _as_type_call(actions: list[GUIAction]) -> str | None:
    """[click at (x, y)], [ctrl+a], [type text], [enter] in this order -> one Agent.type call (None: not this)."""
    rest = list(actions)
    parts = []
    if rest and rest[0].kind == "click" and rest[0].x is not None and len(rest) > 1:
        parts.append(f"coordinates=[{rest[0].x}, {rest[0].y}]")
        rest.pop(0)
    overwrite = bool(rest) and rest[0].kind == "key" and rest[0].keys == ["ctrl", "a"] and (len(rest) > 1 or parts)
    if overwrite:
        rest.pop(0)
    text = rest.pop(0).text if rest and rest[0].kind == "type" else None
    enter = bool(rest) and rest[0].kind == "key" and rest[0].keys == ["enter"] and (text is not None or parts)
    if enter:
        rest.pop(0)
    if rest or (text is None and not enter and not overwrite):
        return None
    if text is not None:
        parts.append(f"text={text!r}")
    parts += ["overwrite=True"] if overwrite else []
    parts += ["enter=True"] if enter else []
    return f"Agent.type({', '.join(parts)})"
