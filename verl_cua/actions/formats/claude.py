"""Anthropic's computer-use tool: the tool input JSON (`{"action": "left_click", "coordinate": [x, y]}`)."""

from __future__ import annotations

import json
import math

from verl_cua.actions.formats.base import BaseFormat, FormatResult, ParseContext, cannot, register_format
from verl_cua.actions.formats.computer_use import POINTER_ACTIONS, pointer_action
from verl_cua.actions.geometry import CoordinateSpace
from verl_cua.actions.keys import normalize_chord
from verl_cua.actions.types import ActionError, GUIAction

TOOL_NAMES = ("computer",)
CLAUDE_ACTIONS = (
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
    "wait",
    "screenshot",
    "cursor_position",
)
_UNSUPPORTED = ("hold_key", "left_mouse_down", "left_mouse_up", "zoom")
_DIRECTIONS = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}
MAX_SCROLL_AMOUNT = 100
CLAUDE_TOOL_TYPE = "computer_20250124"
CLAUDE_MAX = (1280, 800)  # the largest screenshot Anthropic advises sending the computer tool


@register_format("claude")
class ClaudeFormat(BaseFormat):
    """A tool input, a `tool_use` block, a list of them, or a message `content` list with text blocks as thought.

    `screenshot` and `cursor_position` only ask for a new observation; they map to `wait`. A content list with
    text and no tool call is Claude ending its turn: it maps to `done` with the last text as the answer.
    """

    name = "claude"
    mark_example = '{"action": "left_click", "coordinate": "tag_3"}'  # a point named by its set-of-marks mark
    trainable = False  # an API model: evaluated, never trained here

    def detect(self, text: str) -> bool:
        """JSON with an `action` or `tool_use` key."""
        head = text.lstrip()[:1]
        return head in "{[" and bool(head) and ('"action"' in text or '"tool_use"' in text)

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """Claude's scaled screenshot when `image` is given, else the screen."""
        width, height = image if image is not None else screen
        return CoordinateSpace(width, height, screen[0], screen[1])

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """Every tool input in the JSON, in order."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ActionError(f"not valid JSON ({exc.msg} at char {exc.pos})") from None
        except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
            raise ActionError(f"not usable JSON ({exc})") from None
        inputs: list[dict] = []
        thoughts: list[str] = []
        _collect(data, inputs, thoughts, depth=0)
        if not inputs and thoughts:  # an assistant turn with text and no tool call ends the episode
            return FormatResult(actions=[GUIAction("done", text=thoughts[-1])], thought="\n".join(thoughts))
        if not inputs:
            raise ActionError("no computer tool input found (expected an object with 'action')")
        actions: list[GUIAction] = []
        for tool_input in inputs:
            actions.extend(claude_action(tool_input, ctx.space, ctx.notes))
        return FormatResult(actions=actions, thought="\n".join(thoughts) or None)

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """A JSON content list: the thought as a text block, then one `computer` tool_use block per action."""
        texts = [{"type": "text", "text": thought}] if thought else []
        if actions and actions[-1].kind == "done":
            done = actions[-1]
            if len(actions) > 1:
                raise cannot(self.name, done, "a turn ends the task only when it has text and no tool call")
            if not done.text or done.text != done.text.strip():
                raise cannot(self.name, done, "the answer is a text block, so it needs non-blank, stripped text")
            return json.dumps(texts + [{"type": "text", "text": done.text}], ensure_ascii=False)
        uses = [{"type": "tool_use", "name": TOOL_NAMES[0], "input": _tool_input(self.name, a, space)} for a in actions]
        return json.dumps(texts + uses, ensure_ascii=False)

    def expected_thought(self, actions: list[GUIAction], thought: str | None) -> str | None:
        """What `parse` reports as the thought of `render`'s text: a text-only turn keeps its answer in it too."""
        if len(actions) == 1 and actions[0].kind == "done" and actions[0].text:
            return "\n".join(t for t in (thought, actions[0].text) if t)
        return thought

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, list[dict]]:
        """A short system text and Anthropic's `computer` tool for a `size` display."""
        width, height = size
        system = (
            "You are operating a Linux desktop through the computer tool to complete the user's task. "
            "Take one or a few actions at a time and check the new screenshot. "
            f"Actions available: {', '.join(CLAUDE_ACTIONS)}. When the task is complete, stop calling tools and say so."
        )
        tool = {
            "type": CLAUDE_TOOL_TYPE,
            "name": "computer",
            "display_width_px": width,
            "display_height_px": height,
            "display_number": 1,
        }
        return system, [tool]

    def model_image_size(self, screen: tuple[int, int], max_pixels: int | None) -> tuple[int, int]:
        """Anthropic's advice for the computer tool: at most WXGA (1280x800, or `max_pixels`), coordinates scaled
        back."""
        width, height = screen
        scale = min(1.0, CLAUDE_MAX[0] / width, CLAUDE_MAX[1] / height)
        if max_pixels is not None:
            scale = min(scale, math.sqrt(max_pixels / (width * height)))
        return max(1, round(width * scale)), max(1, round(height * scale))


def _collect(data: object, inputs: list[dict], thoughts: list[str], depth: int) -> None:
    if depth > 4:
        raise ActionError("JSON nested too deeply")
    if isinstance(data, list):
        for item in data:
            _collect(item, inputs, thoughts, depth + 1)
        return
    if not isinstance(data, dict):
        raise ActionError(f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    if "action" in data and kind is None:
        inputs.append(data)
    elif kind == "tool_use":
        if data.get("name") not in TOOL_NAMES:
            raise ActionError(f"tool_use names tool {data.get('name')!r:.40}; expected 'computer'")
        if not isinstance(data.get("input"), dict):
            raise ActionError("tool_use block has no 'input' object")
        inputs.append(data["input"])
    elif kind == "text":
        if isinstance(data.get("text"), str) and data["text"].strip():
            thoughts.append(data["text"].strip())
    elif kind in ("thinking", "redacted_thinking"):
        return
    elif "content" in data:  # a whole message or API response
        _collect(data["content"], inputs, thoughts, depth + 1)
    else:
        raise ActionError(f"unrecognised JSON object with keys {sorted(data)[:5]}")


def claude_action(tool_input: dict, space: CoordinateSpace, notes: list[str]) -> list[GUIAction]:
    """One computer-tool input -> GUI actions in screen pixels."""
    action = tool_input.get("action")
    if not isinstance(action, str):
        raise ActionError("computer tool input has no 'action'")
    if action in POINTER_ACTIONS:
        if tool_input.get("text"):
            raise ActionError(f"{action} while holding {tool_input['text']!r:.20} is not supported")
        return [pointer_action(action, tool_input.get("coordinate"), space, notes)]
    if action == "left_click_drag":
        end = tool_input.get("coordinate")
        if end is None:
            raise ActionError("left_click_drag needs 'coordinate'")
        x2, y2 = space.point(end, notes)
        start = tool_input.get("start_coordinate")
        x, y = space.point(start, notes) if start is not None else (None, None)
        return [GUIAction("drag", x=x, y=y, x2=x2, y2=y2)]
    if action == "type":
        text = tool_input.get("text")
        if not isinstance(text, str):
            raise ActionError("type needs 'text' as a string")
        return [GUIAction("type", text=text)]
    if action == "key":  # xdotool syntax: "+" joins a chord, spaces separate presses ("ctrl+a Delete")
        text = tool_input.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ActionError("key needs 'text' like 'ctrl+s'")
        return [GUIAction("key", keys=normalize_chord(chord)) for chord in text.split()]
    if action == "scroll":
        return [_scroll(tool_input, space, notes)]
    if action in ("wait", "screenshot", "cursor_position"):
        return [GUIAction("wait")]
    if action in _UNSUPPORTED:
        raise ActionError(f"computer action {action!r} is not supported")
    raise ActionError(f"unknown computer action {action!r:.40}; valid: {', '.join(CLAUDE_ACTIONS)}")


def _scroll(tool_input: dict, space: CoordinateSpace, notes: list[str]) -> GUIAction:
    direction = tool_input.get("scroll_direction")
    if not isinstance(direction, str) or direction not in _DIRECTIONS:
        raise ActionError(f"scroll needs scroll_direction up, down, left or right, got {direction!r:.20}")
    amount = tool_input.get("scroll_amount", 3)
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount <= MAX_SCROLL_AMOUNT:
        raise ActionError(f"scroll_amount must be an integer 0..{MAX_SCROLL_AMOUNT}, got {amount!r:.20}")
    if tool_input.get("text"):
        raise ActionError("scroll while holding a key is not supported")
    x = y = None
    if tool_input.get("coordinate") is not None:
        x, y = space.point(tool_input["coordinate"], notes)
    sx, sy = _DIRECTIONS[direction]
    return GUIAction("scroll", x=x, y=y, dx=sx * amount or None, dy=sy * amount or None)


_POINTER_NAMES = {kind: action for action, kind in POINTER_ACTIONS.items()}
_DIRECTION_OF = {step: direction for direction, step in _DIRECTIONS.items()}
# pyautogui key names -> the xdotool keysyms Anthropic's computer tool uses (others are spelled the same)
_XDOTOOL = {
    "enter": "Return",
    "esc": "Escape",
    "backspace": "BackSpace",
    "tab": "Tab",
    "delete": "Delete",
    "insert": "Insert",
    "home": "Home",
    "end": "End",
    "pageup": "Page_Up",
    "pagedown": "Page_Down",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "win": "super",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "printscreen": "Print",
    "apps": "Menu",
    "+": "plus",
    "-": "minus",
    "=": "equal",
    ",": "comma",
    ".": "period",
    "/": "slash",
    "\\": "backslash",
    ";": "semicolon",
    "'": "apostrophe",
    "`": "grave",
    "[": "bracketleft",
    "]": "bracketright",
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
    **{f"num{i}": f"KP_{i}" for i in range(10)},
}


def xdotool_chord(keys: list[str]) -> str:
    """pyautogui key names -> one xdotool chord like `ctrl+shift+t` or `Return`."""
    return "+".join(_XDOTOOL.get(k, k) for k in keys)


def _tool_input(fmt: str, a: GUIAction, space: CoordinateSpace) -> dict:
    at = {} if a.x is None else {"coordinate": list(space.from_screen(a.x, a.y))}
    if a.kind in _POINTER_NAMES:
        if a.x is None and a.kind == "move":
            raise cannot(fmt, a, "mouse_move needs a coordinate")
        return {"action": _POINTER_NAMES[a.kind], **at}
    if a.kind == "drag":
        start = {} if a.x is None else {"start_coordinate": at["coordinate"]}
        return {"action": "left_click_drag", **start, "coordinate": list(space.from_screen(a.x2, a.y2))}
    if a.kind == "scroll":
        dx, dy = a.dx or 0, a.dy or 0
        if bool(dx) == bool(dy):
            raise cannot(fmt, a, "one scroll has exactly one scroll_direction")
        amount = abs(dx or dy)
        if amount > MAX_SCROLL_AMOUNT:
            raise cannot(fmt, a, f"scroll_amount is at most {MAX_SCROLL_AMOUNT}")
        direction = _DIRECTION_OF[((dx > 0) - (dx < 0), (dy > 0) - (dy < 0))]
        return {"action": "scroll", **at, "scroll_direction": direction, "scroll_amount": amount}
    if a.kind == "type":
        return {"action": "type", "text": a.text}
    if a.kind == "key":
        return {"action": "key", "text": xdotool_chord(a.keys)}
    if a.kind == "wait":
        return {"action": "wait", "duration": 1}
    if a.kind == "fail":
        raise cannot(fmt, a, "the computer tool has no way to give up")
    raise cannot(fmt, a, "only as a text-only turn on its own" if a.kind == "done" else "unknown action kind")
