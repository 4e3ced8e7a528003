"""UI-TARS-1.5: `Thought: ...\\nAction: click(start_box='(x,y)')`, coordinates in the resized image."""

from __future__ import annotations

import re

from verl_cua.actions.formats.base import BaseFormat, FormatResult, ParseContext, cannot, register_format
from verl_cua.actions.geometry import MARK_NAME, UITARS_RESIZE, CoordinateSpace, smart_resize_size
from verl_cua.actions.keys import normalize_chord
from verl_cua.actions.types import ActionError, GUIAction

SCROLL_CLICKS = 5  # UI-TARS names no amount; its own OSWorld agent scrolls 5 clicks
UITARS_ACTIONS = (
    "click",
    "left_single",
    "left_double",
    "right_single",
    "hover",
    "move_to",
    "drag",
    "select",
    "hotkey",
    "press",
    "type",
    "scroll",
    "wait",
    "finished",
    "call_user",
)
_POINTER = {
    "click": "click",
    "left_single": "click",
    "left_double": "double_click",
    "right_single": "right_click",
    "hover": "move",
    "move_to": "move",
}
_BOX_KEYS = {
    "start_box": "start_box",
    "point": "start_box",
    "start_point": "start_box",
    "end_box": "end_box",
    "end_point": "end_box",
}
_SCROLL = {
    "up": (0, SCROLL_CLICKS),
    "down": (0, -SCROLL_CLICKS),
    "left": (-SCROLL_CLICKS, 0),
    "right": (SCROLL_CLICKS, 0),
}

_ACTION_LINE = re.compile(r"(?:^|\n)[ \t]*Action[ \t]*:")
_HEAD = re.compile(r"\s*([A-Za-z_]\w*)\s*\(")
_KEY = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*")
_QUOTED = {"'": re.compile(r"((?:[^'\\]|\\.)*)'", re.S), '"': re.compile(r'((?:[^"\\]|\\.)*)"', re.S)}
# free text ends at a quote + ")" that closes the last call or is followed by a blank line (the next call)
_CONTENT_END = {q: re.compile(re.escape(q) + r"\s*\)(?=\s*\Z|[ \t]*\n\s*\n)") for q in "'\""}
_ESCAPE = re.compile(r"\\(.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_BOX_TAGS = re.compile(r"<\|box_start\|>|<\|box_end\|>|</?point>|</?bbox>")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_NUM = r"-?\d+(?:\.\d+)?"
_BOX_TEXT = re.compile(rf"\s*[(\[]?\s*{_NUM}(?:\s*[,\s]\s*{_NUM}){{1,3}}\s*[)\]]?\s*")
_THOUGHT_HEAD = re.compile(r"^\s*(?:Thought|Reflection|Action_Summary)\s*:\s*")


@register_format("uitars")
class UITarsFormat(BaseFormat):
    """UI-TARS-1.5 action strings; `<|box_start|>`, `<point>x y</point>`, `point=`/`start_point=` all accepted."""

    name = "uitars"
    mark_example = "click(start_box='tag_3')"  # a point named by its set-of-marks mark
    resize = UITARS_RESIZE

    def detect(self, text: str) -> bool:
        """An `Action:` line followed by a call."""
        m = _ACTION_LINE.search(text)
        return m is not None and _HEAD.match(text, m.end()) is not None

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """The resized image's pixels; by default smart_resize with UI-TARS's limits. image=(1000, 1000) reads
        UI-TARS-1.0's relative coordinates."""
        width, height = image if image is not None else smart_resize_size(screen, **self.resize)
        return CoordinateSpace(width, height, screen[0], screen[1])

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """The (last) `Action:` section: calls one after another, each on its own line(s)."""
        matches = list(_ACTION_LINE.finditer(text))
        if not matches:
            raise ActionError("no 'Action:' line found")
        thought = _THOUGHT_HEAD.sub("", text[: matches[-1].start()]).strip() or None
        section = text[matches[-1].end() :].strip()
        if not section:
            raise ActionError("empty 'Action:' line")
        actions: list[GUIAction] = []
        pos = 0
        while pos < len(section):
            name, args, pos = parse_call(section, pos)
            actions.extend(_to_actions(name, args, ctx))
            rest = section[pos : pos + 200].lstrip(" \t")
            if rest and rest[0] not in "\r\n":
                raise ActionError(f"unexpected text after {name}(...): {rest.strip()!r:.40}")
            while pos < len(section) and section[pos] in " \t\r\n":
                pos += 1
        return FormatResult(actions=actions, thought=thought)

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """`Thought: ...` then `Action:` with one call per action, calls separated by a blank line."""
        calls = "\n\n".join(_render_call(self.name, a, space) for a in actions)
        return (f"Thought: {thought}\n" if thought else "") + f"Action: {calls}"

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, None]:
        """UI-TARS-1.5's own prompt: the output format and action space, coordinates in the `size` image."""
        system = (
            "You are a GUI agent. You are given a task and your action history, with screenshots. "
            "You need to perform the next action to complete the task.\n\n"
            "## Output Format\n```\nThought: ...\nAction: ...\n```\n\n"
            "## Action Space\n"
            "click(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
            "left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
            "right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
            "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')\n"
            "hotkey(key='')\n"
            "type(content='') #If you want to submit your input, use \"\\n\" at the end of `content`.\n"
            "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')\n"
            "wait() #Sleep for 5s and take a screenshot to check for any changes.\n"
            "finished(content='xxx') # Use escape characters \\', \\\", and \\n in content part to ensure we can "
            "parse the content in normal python string format.\n\n"
            "## Note\n- Use English in `Thought` part.\n"
            "- Write a small plan and finally summarize your next action (with its target element) in one sentence "
            "in `Thought` part.\n"
            f"- Coordinates are pixels of the {size[0]}x{size[1]} screenshot you see; a scroll moves {SCROLL_CLICKS} "
            "wheel clicks."
        )
        return system, None

    def user_text(self, instruction: str, context: str | None) -> str:
        """UI-TARS's `## User Instruction` heading (no per-turn context)."""
        return f"## User Instruction\n{instruction}"


def parse_call(segment: str, pos: int = 0) -> tuple[str, dict[str, str], int]:
    """`name(key='value', key2=(1,2))` at `pos` -> (name, {key: raw value}, end); quoted values are unescaped."""
    head = _HEAD.match(segment, pos)
    if head is None:
        found = segment[pos : pos + 60].strip()
        raise ActionError(f"expected an action call like click(start_box='(x,y)'), got {found!r:.60}")
    name, pos, args = head.group(1), head.end(), {}
    n = len(segment)
    while True:
        while pos < n and segment[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            raise ActionError(f"{name}(...) is not closed")
        if segment[pos] == ")":
            pos += 1
            break
        key_match = _KEY.match(segment, pos)
        if key_match is None:
            raise ActionError(f"{name}(...) has an argument that is not key=value: {segment[pos : pos + 30]!r}")
        key, pos = key_match.group(1), key_match.end()
        value, pos = _value(segment, pos, name, key)
        args[key] = value
    return name, args, pos


def _value(segment: str, pos: int, name: str, key: str) -> tuple[str, int]:
    if pos >= len(segment):
        raise ActionError(f"{name}({key}=...) is truncated")
    quote = segment[pos]
    if quote in _QUOTED:
        if key == "content":  # free text: runs to the last quote before the closing parenthesis
            m = _CONTENT_END[quote].search(segment, pos + 1)
            if m is None:
                raise ActionError(f"{name}(content=...) is not terminated")
            return _unescape(segment[pos + 1 : m.start()]), m.start() + 1
        m = _QUOTED[quote].match(segment, pos + 1)
        if m is None:
            raise ActionError(f"{name}({key}=...) has an unterminated string")
        return _unescape(m.group(1)), m.end()
    if quote in "([":  # an unquoted box: (x,y) or [x, y]
        close = segment.find(")" if quote == "(" else "]", pos)
        if close < 0:
            raise ActionError(f"{name}({key}=...) has an unclosed box")
        return segment[pos : close + 1], close + 1
    end = pos
    while end < len(segment) and segment[end] not in ",)":
        end += 1
    return segment[pos:end].strip(), end


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), raw)


def parse_box(raw: str, space: CoordinateSpace, notes: list[str]) -> tuple[int, int]:
    """`'(x,y)'`, `'<|box_start|>(x1,y1,x2,y2)<|box_end|>'`, `'<point>x y</point>'` -> screen point (box centre);
    `'tag_3'` (set-of-marks) -> mark 3's centre."""
    stripped = _BOX_TAGS.sub(" ", raw)
    if len(stripped) <= 64 and MARK_NAME.fullmatch(stripped):
        return space.point(stripped, notes)
    if _BOX_TEXT.fullmatch(stripped) is None:
        raise ActionError(f"box must hold numbers only, got {raw!r:.60}")
    numbers = [float(v) for v in _NUMBER.findall(stripped)]
    if len(numbers) not in (2, 4):
        raise ActionError(f"box must hold 2 or 4 numbers, got {len(numbers)} in {raw!r:.60}")
    return space.point(numbers, notes)


def _to_actions(name: str, raw_args: dict[str, str], ctx: ParseContext) -> list[GUIAction]:
    args = {_BOX_KEYS.get(k, k): v for k, v in raw_args.items()}
    space, notes = ctx.space, ctx.notes
    if name in _POINTER:
        x, y = parse_box(_need(args, "start_box", name), space, notes)
        return [GUIAction(_POINTER[name], x=x, y=y)]
    if name in ("drag", "select"):
        x, y = parse_box(_need(args, "start_box", name), space, notes)
        x2, y2 = parse_box(_need(args, "end_box", name), space, notes)
        return [GUIAction("drag", x=x, y=y, x2=x2, y2=y2)]
    if name in ("hotkey", "press"):
        keys = args.get("key") or args.get("hotkey") or args.get("press")
        if not keys:
            raise ActionError(f"{name} needs key='...'")
        return [GUIAction("key", keys=normalize_chord(keys))]
    if name == "type":
        if "content" not in args:
            raise ActionError("type needs content='...'")
        return [GUIAction("type", text=args["content"])]
    if name == "scroll":
        direction = args.get("direction", "").strip().strip("'\"").lower()
        if direction not in _SCROLL:
            raise ActionError(f"scroll needs direction up, down, left or right, got {direction!r:.30}")
        dx, dy = _SCROLL[direction]
        x = y = None
        if args.get("start_box"):
            x, y = parse_box(args["start_box"], space, notes)
        return [GUIAction("scroll", x=x, y=y, dx=dx or None, dy=dy or None)]
    if name == "wait":
        return [GUIAction("wait")]
    if name == "finished":
        return [GUIAction("done", text=args.get("content") or None)]
    if name == "call_user":
        return [GUIAction("fail", text="call_user")]
    raise ActionError(f"unknown UI-TARS action {name!r:.40}; valid: {', '.join(UITARS_ACTIONS)}")


def _need(args: dict[str, str], key: str, name: str) -> str:
    value = args.get(key)
    if not value:
        raise ActionError(f"{name} needs {key}='(x,y)'")
    return value


_POINTER_NAMES = {"click": "click", "double_click": "left_double", "right_click": "right_single", "move": "hover"}
_DIRECTION_OF = {amounts: direction for direction, amounts in _SCROLL.items()}
_ESCAPED = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_KEY_SPELLING = {"+": "plus"}  # a lone "+" between keys reads as a separator


def _render_call(fmt: str, a: GUIAction, space: CoordinateSpace) -> str:
    if a.kind in _POINTER_NAMES:
        if a.x is None:
            raise cannot(fmt, a, "every UI-TARS pointer action needs start_box")
        return f"{_POINTER_NAMES[a.kind]}(start_box={_box(a.x, a.y, space)})"
    if a.kind in ("middle_click", "triple_click"):
        raise cannot(fmt, a, f"UI-TARS has no {a.kind} action")
    if a.kind == "drag":
        if a.x is None:
            raise cannot(fmt, a, "drag needs a start_box")
        return f"drag(start_box={_box(a.x, a.y, space)}, end_box={_box(a.x2, a.y2, space)})"
    if a.kind == "scroll":
        direction = _DIRECTION_OF.get((a.dx or 0, a.dy or 0))
        if direction is None:
            raise cannot(fmt, a, f"UI-TARS scrolls exactly {SCROLL_CLICKS} clicks along one axis")
        at = "" if a.x is None else f"start_box={_box(a.x, a.y, space)}, "
        return f"scroll({at}direction='{direction}')"
    if a.kind == "type":
        return f"type(content={_quote(a.text)})"
    if a.kind == "key":
        return f"hotkey(key={_quote(' '.join(_KEY_SPELLING.get(k, k) for k in a.keys))})"
    if a.kind == "wait":
        return "wait()"
    if a.kind == "done":
        return "finished()" if a.text is None else f"finished(content={_quote(a.text)})"
    if a.kind == "fail":
        if a.text != "call_user":
            raise cannot(fmt, a, "UI-TARS has no fail action; only call_user() (read as fail with text 'call_user')")
        return "call_user()"
    raise cannot(fmt, a, "unknown action kind")


def _box(x: int, y: int, space: CoordinateSpace) -> str:
    bx, by = space.from_screen(x, y)
    return f"'({bx},{by})'"


def _quote(text: str) -> str:
    """A single-quoted value the parser unescapes back to `text` (no raw newline, so no early end)."""
    return "'" + "".join(_ESCAPED.get(ch, ch) for ch in text) + "'"
