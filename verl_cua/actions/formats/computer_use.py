"""Qwen-VL's `computer_use` tool calls (`<tool_call>{"name": "computer_use", ...}</tool_call>`), both Qwen formats."""

from __future__ import annotations

import json
import re

from verl_cua.actions.formats.base import FormatResult, ParseContext, cannot
from verl_cua.actions.geometry import CoordinateSpace
from verl_cua.actions.keys import normalize_chord
from verl_cua.actions.types import ActionError, GUIAction

TOOL_NAME = "computer_use"
COMPUTER_USE_ACTIONS = (
    "key",
    "type",
    "mouse_move",
    "left_click",
    "left_click_drag",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "scroll",
    "hscroll",
    "wait",
    "terminate",
    "answer",
)
# Pointer actions named as Anthropic's computer tool named them; Qwen's computer_use tool reuses the names.
POINTER_ACTIONS = {
    "left_click": "click",
    "right_click": "right_click",
    "middle_click": "middle_click",
    "double_click": "double_click",
    "triple_click": "triple_click",
    "mouse_move": "move",
}
MAX_SCROLL = 10000

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_THINK = re.compile(r"</?think>")


def detect_tool_call(text: str) -> bool:
    """Both Qwen formats share this shape; `auto` therefore reports them as ambiguous."""
    return "<tool_call>" in text


def parse_tool_calls(text: str, ctx: ParseContext) -> FormatResult:
    """All `<tool_call>` blocks of one output -> actions; prose outside them becomes the thought."""
    blocks = _TOOL_CALL.findall(text)
    if not blocks:
        raise ActionError("no <tool_call> block found")
    actions: list[GUIAction] = []
    for i, block in enumerate(blocks, 1):
        actions.extend(_one_call(block, i, ctx.space, ctx.notes))
    prose = _THINK.sub("", _TOOL_CALL.sub("", text)).strip()
    return FormatResult(actions=actions, thought=prose or None)


def _one_call(block: str, index: int, space: CoordinateSpace, notes: list[str]) -> list[GUIAction]:
    try:
        call = json.loads(block)
    except json.JSONDecodeError as exc:
        raise ActionError(f"tool call {index} is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        raise ActionError(f"tool call {index} is not usable JSON ({exc})") from None
    if not isinstance(call, dict):
        raise ActionError(f"tool call {index} must be a JSON object")
    name = call.get("name")
    if name != TOOL_NAME:
        raise ActionError(f"tool call {index} names tool {name!r:.40}; expected {TOOL_NAME!r}")
    args = call.get("arguments")
    if isinstance(args, str):  # some servers send arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            raise ActionError(f"tool call {index} has arguments that are not valid JSON") from None
    if not isinstance(args, dict):
        raise ActionError(f"tool call {index} has no 'arguments' object")
    return computer_use_action(args, space, notes)


def computer_use_action(args: dict, space: CoordinateSpace, notes: list[str]) -> list[GUIAction]:
    """One `computer_use` arguments object -> GUI actions in screen pixels."""
    action = args.get("action")
    if not isinstance(action, str):
        raise ActionError("computer_use call has no 'action'")
    if action in POINTER_ACTIONS:
        return [pointer_action(action, args.get("coordinate"), space, notes)]
    if action == "left_click_drag":
        x2, y2 = space.point(_required(args, "coordinate", action), notes)
        start = args.get("start_coordinate")
        x, y = space.point(start, notes) if start is not None else (None, None)
        return [GUIAction("drag", x=x, y=y, x2=x2, y2=y2)]
    if action == "type":
        text = _required(args, "text", action)
        if not isinstance(text, str):
            raise ActionError("type needs 'text' as a string")
        return [GUIAction("type", text=text)]
    if action == "key":
        return [GUIAction("key", keys=normalize_chord(_required(args, "keys", action)))]
    if action in ("scroll", "hscroll"):
        amount = _scroll_amount(_required(args, "pixels", action), notes)
        x = y = None
        if args.get("coordinate") is not None:
            x, y = space.point(args["coordinate"], notes)
        if action == "scroll":
            return [GUIAction("scroll", x=x, y=y, dy=amount)]
        return [GUIAction("scroll", x=x, y=y, dx=amount)]
    if action == "wait":
        return [GUIAction("wait")]
    if action == "terminate":
        status = args.get("status")
        if status not in ("success", "failure"):
            raise ActionError(f"terminate needs status 'success' or 'failure', got {status!r:.40}")
        return [GUIAction("done" if status == "success" else "fail")]
    if action == "answer":
        text = _required(args, "text", action)
        if not isinstance(text, str):
            raise ActionError("answer needs 'text' as a string")
        return [GUIAction("done", text=text)]
    raise ActionError(f"unknown computer_use action {action!r:.40}; valid: {', '.join(COMPUTER_USE_ACTIONS)}")


def pointer_action(action: str, coordinate: object, space: CoordinateSpace, notes: list[str]) -> GUIAction:
    """A click or move; clicks without a coordinate happen at the cursor (the tool schemas allow that)."""
    if coordinate is None:
        if action == "mouse_move":
            raise ActionError("mouse_move needs 'coordinate'")
        return GUIAction(POINTER_ACTIONS[action])
    x, y = space.point(coordinate, notes)
    return GUIAction(POINTER_ACTIONS[action], x=x, y=y)


def _required(args: dict, key: str, action: str):
    value = args.get(key)
    if value is None:
        raise ActionError(f"{action} needs '{key}'")
    return value


def _scroll_amount(value: object, notes: list[str]) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        raise ActionError(f"scroll 'pixels' must be a number, got {value!r:.40}")
    amount = int(round(value))
    if abs(amount) > MAX_SCROLL:
        notes.append(f"scroll amount {amount} beyond +-{MAX_SCROLL}; clamped")
        amount = MAX_SCROLL if amount > 0 else -MAX_SCROLL
    return amount


_POINTER_NAMES = {kind: action for action, kind in POINTER_ACTIONS.items()}


def render_tool_calls(fmt: str, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
    """Actions -> optional thought prose, then one `<tool_call>` block per action (both Qwen formats)."""
    blocks = [_tool_call({"name": TOOL_NAME, "arguments": _arguments(fmt, a, space)}) for a in actions]
    return "\n".join(([thought] if thought else []) + blocks)


def _tool_call(call: dict) -> str:
    body = json.dumps(call, ensure_ascii=False)
    if "tool_call>" in body:  # typed text quoting the tag would end the block early; "<" only occurs in strings
        body = body.replace("<", "\\u003c")
    return f"<tool_call>\n{body}\n</tool_call>"


def _arguments(fmt: str, a: GUIAction, space: CoordinateSpace) -> dict:
    if a.kind in _POINTER_NAMES:
        if a.x is None and a.kind == "move":
            raise cannot(fmt, a, "mouse_move needs a coordinate")
        at = {} if a.x is None else {"coordinate": list(space.from_screen(a.x, a.y))}
        return {"action": _POINTER_NAMES[a.kind], **at}
    if a.kind == "drag":
        start = {} if a.x is None else {"start_coordinate": list(space.from_screen(a.x, a.y))}
        return {"action": "left_click_drag", **start, "coordinate": list(space.from_screen(a.x2, a.y2))}
    if a.kind == "scroll":
        at = {} if a.x is None else {"coordinate": list(space.from_screen(a.x, a.y))}
        if a.dy:
            return {"action": "scroll", "pixels": a.dy, **at}
        return {"action": "hscroll", "pixels": a.dx, **at}
    if a.kind == "type":
        return {"action": "type", "text": a.text}
    if a.kind == "key":
        return {"action": "key", "keys": list(a.keys)}
    if a.kind == "wait":
        return {"action": "wait", "time": 1}
    if a.kind == "done":
        return {"action": "terminate", "status": "success"} if a.text is None else {"action": "answer", "text": a.text}
    if a.kind == "fail":
        if a.text is not None:
            raise cannot(fmt, a, "terminate(status='failure') carries no reason text")
        return {"action": "terminate", "status": "failure"}
    raise cannot(fmt, a, "unknown action kind")


# -- the prompt -----------------------------------------------------------------------------------------------------
def computer_use_tool(size: tuple[int, int]) -> dict:
    """Qwen-VL's `computer_use` function schema with the resolution the model's coordinates use."""
    width, height = size
    actions = {
        "key": "Press keys down in the order given, then release them in reverse order (a chord).",
        "type": "Type a string of text on the keyboard.",
        "mouse_move": "Move the cursor to the (x, y) coordinate.",
        "left_click": "Click the left mouse button at the (x, y) coordinate.",
        "left_click_drag": "Press the left button at the cursor and drag to the (x, y) coordinate.",
        "right_click": "Click the right mouse button at the (x, y) coordinate.",
        "middle_click": "Click the middle mouse button at the (x, y) coordinate.",
        "double_click": "Double-click the left mouse button at the (x, y) coordinate.",
        "triple_click": "Triple-click the left mouse button at the (x, y) coordinate (selects a line).",
        "scroll": "Scroll the mouse wheel vertically by `pixels` (positive up, negative down).",
        "hscroll": "Scroll horizontally by `pixels` (positive right, negative left).",
        "wait": "Wait `time` seconds for something to change.",
        "terminate": "End the task, reporting `status` success or failure.",
        "answer": "Give the answer `text` to a question the task asked, ending the task.",
    }
    assert tuple(actions) == COMPUTER_USE_ACTIONS
    description = (
        "Use a mouse and keyboard to interact with a computer, and take screenshots.\n"
        "* This is an interface to a desktop GUI. You do not have access to a terminal or applications menu; "
        "click on desktop icons to start applications.\n"
        "* Some applications take time to start or process actions; wait and take another screenshot if needed.\n"
        f"* The screen's resolution is {width}x{height}.\n"
        "* Click with the cursor tip in the middle of an element, not on its edge.\n"
        "The available actions are:\n" + "\n".join(f"* `{k}`: {v}" for k, v in actions.items())
    )
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(COMPUTER_USE_ACTIONS), "description": "The action."},
                    "keys": {"type": "array", "description": "Required only by action=key."},
                    "text": {"type": "string", "description": "Required only by action=type and action=answer."},
                    "coordinate": {
                        "type": "array",
                        "description": f"(x, y): pixels from the left and top edges, within {width}x{height}.",
                    },
                    "pixels": {"type": "number", "description": "Required only by action=scroll and action=hscroll."},
                    "time": {"type": "number", "description": "Required only by action=wait."},
                    "status": {
                        "type": "string",
                        "enum": ["success", "failure"],
                        "description": "Required only by action=terminate.",
                    },
                },
                "required": ["action"],
            },
        },
    }


def computer_use_prompt(size: tuple[int, int]) -> tuple[str, list[dict]]:
    """Qwen-VL's computer-use system prompt (its `<tools>` block) and the tool, coordinates in `size`."""
    tool = computer_use_tool(size)
    system = (
        "You are a computer-use agent. Complete the user's task on the desktop shown in the screenshots.\n\n"
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(tool["function"], ensure_ascii=False)
        + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n'
        "Before the call, say in one or two sentences what you see and what you will do next."
    )
    return system, [tool]
