"""OSWorld's `pyautogui` action space: prose plus a ```python block of pyautogui calls, or WAIT / DONE / FAIL."""

from __future__ import annotations

import re

from verl_cua.actions.formats.api_gui import API_GUI_CALL
from verl_cua.actions.formats.base import BaseFormat, FormatResult, ParseContext, cannot, register_format
from verl_cua.actions.geometry import CoordinateSpace, Mark
from verl_cua.actions.keys import normalize_chord, normalize_key
from verl_cua.actions.render import WAIT_SECONDS, render_pyautogui
from verl_cua.actions.safety import SafeCall, check_code, log_raw_code
from verl_cua.actions.types import TERMINAL_KINDS, ActionError, GUIAction

SPECIAL_WORDS = {"WAIT": "wait", "DONE": "done", "FAIL": "fail"}
MAX_PRESSES = 50
MAX_CLICK_SCROLL = 10000

# one info-string class only: overlapping classes here backtrack quadratically on long unterminated fences
_FENCE = re.compile(r"```([^\n`]*)(?:\n|(?=```))(.*?)(```|\Z)", re.S)
_LANG = re.compile(r"[A-Za-z0-9_+-]+")
_CODE_LANGS = {"", "python", "py", "python3"}
_CODE_START = re.compile(r"\s*(?:import\s|pyautogui\.|time\.)")

# Parameter names by position, for binding positional arguments (pyautogui's own signatures).
_SIGNATURES = {
    "click": ("x", "y", "clicks", "interval", "button", "duration"),
    "doubleClick": ("x", "y", "interval", "button", "duration"),
    "tripleClick": ("x", "y", "interval", "button", "duration"),
    "rightClick": ("x", "y", "interval", "duration"),
    "middleClick": ("x", "y", "interval", "duration"),
    "moveTo": ("x", "y", "duration"),
    "dragTo": ("x", "y", "duration", "tween", "button"),
    "mouseDown": ("x", "y", "button", "duration"),
    "mouseUp": ("x", "y", "button", "duration"),
    "scroll": ("clicks", "x", "y"),
    "vscroll": ("clicks", "x", "y"),
    "hscroll": ("clicks", "x", "y"),
    "write": ("message", "interval"),
    "typewrite": ("message", "interval"),
    "press": ("keys", "presses", "interval"),
    "keyDown": ("key",),
    "keyUp": ("key",),
    "sleep": ("seconds",),
}
_IGNORED_KWARGS = {"duration", "interval", "tween", "logScreenshot", "_pause", "pause", "mouseDownUp"}
_CLICK_KINDS = {
    ("left", 1): "click",
    ("left", 2): "double_click",
    ("left", 3): "triple_click",
    ("right", 1): "right_click",
    ("middle", 1): "middle_click",
}
_BUTTONS = {"left": "left", "primary": "left", "right": "right", "secondary": "right", "middle": "middle"}
_FIXED_CLICKS = {"click": None, "doubleClick": 2, "tripleClick": 3, "rightClick": 1, "middleClick": 1}
_FIXED_BUTTON = {"rightClick": "right", "middleClick": "middle"}


@register_format("pyautogui")
class PyAutoGUIFormat(BaseFormat):
    """Screen-pixel pyautogui code, checked by `verl_cua.actions.safety` and never executed here."""

    name = "pyautogui"
    mark_example = "pyautogui.click(tag_3)"  # a point named by its set-of-marks mark

    def detect(self, text: str) -> bool:
        """A code fence, pyautogui calls, or a bare WAIT/DONE/FAIL."""
        stripped = text.strip().strip("`").strip()
        if "pyautogui." in text or stripped in SPECIAL_WORDS:
            return True
        return "```python" in text and not API_GUI_CALL.search(text)  # Agent.click(...) in a block: api_gui's

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """Screen pixels (OSWorld's pyautogui space); `image` is not used."""
        return CoordinateSpace(screen[0], screen[1], screen[0], screen[1])

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """Code blocks and special words, in order; prose outside the blocks is the thought."""
        blocks, thought = _split_blocks(text)
        actions: list[GUIAction] = []
        for kind, body in blocks:
            if kind == "word":
                actions.append(GUIAction(SPECIAL_WORDS[body]))
                continue
            try:
                actions.extend(calls_to_actions(check_code(body), ctx.space, ctx.notes))
            except ActionError:
                if not ctx.allow_raw_code:
                    raise
                code = "\n".join(b for k, b in blocks if k == "code")
                log_raw_code(code)
                return FormatResult(actions=[], thought=thought, code=code)
        return FormatResult(actions=actions, thought=thought)

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """Thought prose, one ```python block, then DONE/FAIL for a terminal action; or a bare WAIT/DONE/FAIL."""
        return render_code(self.name, actions, space, thought)

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, None]:
        """OSWorld-style pyautogui instructions for a `size` screen: the allowed calls, the special words."""
        width, height = size
        system = (
            "You are an agent that carries out tasks on a Linux desktop for the user. Each turn you get a screenshot "
            f"of the {width}x{height} screen and reply with the next step as Python code that uses `pyautogui`.\n"
            "Rules:\n"
            "* Put the code in one ```python block. Use only pyautogui.click, doubleClick, tripleClick, rightClick, "
            "middleClick, moveTo, dragTo, mouseDown, mouseUp, scroll, hscroll, write, press, hotkey, keyDown, keyUp "
            "and time.sleep, with literal numbers and strings as arguments.\n"
            "* Coordinates are screen pixels read from the screenshot; do not call pyautogui.locateCenterOnScreen "
            "or pyautogui.screenshot.\n"
            "* Each step should be short; you will see a new screenshot after it.\n"
            "* Instead of code you may answer with one word: WAIT to wait, DONE when the task is complete, "
            "FAIL if it cannot be done.\n"
            "Briefly explain your reasoning before the code block."
        )
        return system, None


def _split_blocks(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """[("code", body) | ("word", "WAIT")] in order, plus the prose around them."""
    blocks: list[tuple[str, str]] = []
    prose: list[str] = []
    last = 0
    for m in _FENCE.finditer(text):
        info, body, closing = m.group(1).strip(), m.group(2), m.group(3)
        if not closing:
            raise ActionError("unterminated ``` code block (output truncated?)")
        prose.append(text[last : m.start()])
        last = m.end()
        first = info.split()[0] if info else ""
        lang = first if _LANG.fullmatch(first) else ""
        inline = info[len(lang) :].strip()  # "```python pyautogui.click(1, 2)```": code on the fence line
        body = f"{inline}\n{body}" if inline else body
        if not body.strip() and lang in SPECIAL_WORDS:  # "```DONE```"
            blocks.append(("word", lang))
        elif body.strip() in SPECIAL_WORDS:
            blocks.append(("word", body.strip()))
        elif lang.lower() in _CODE_LANGS:
            blocks.extend(_code_and_word(body))
        else:
            raise ActionError(f"code block in {lang!r:.20} is not allowed (only python)")
    if last:
        tail, word = _trailing_word(text[last:])  # "```python ...```\nDONE"
        prose.append(tail)
        if word:
            blocks.append(("word", word))
        return blocks, "\n".join(p.strip() for p in prose if p.strip()) or None
    stripped = text.strip()
    if stripped in SPECIAL_WORDS:
        return [("word", stripped)], None
    if _CODE_START.match(text):
        return _code_and_word(text), None
    head, word = _trailing_word(stripped)
    if word:  # "The sheet is saved.\nDONE"
        return [("word", word)], head.strip() or None
    raise ActionError("no ```python code block and no WAIT/DONE/FAIL found")


def _trailing_word(text: str) -> tuple[str, str | None]:
    """Split a last line that is exactly WAIT, DONE or FAIL off `text` (OSWorld agents end code this way)."""
    head, _, last_line = text.rstrip().rpartition("\n")
    if last_line.strip() in SPECIAL_WORDS:
        return head, last_line.strip()
    return text, None


def _code_and_word(body: str) -> list[tuple[str, str]]:
    code, word = _trailing_word(body)
    blocks = [("code", code)] if code.strip() else []
    return blocks + [("word", word)] if word else blocks


def calls_to_actions(calls: list[SafeCall], space: CoordinateSpace, notes: list[str]) -> list[GUIAction]:
    """Allow-listed pyautogui calls -> GUI actions, folding moveTo+dragTo, mouseDown/Up and keyDown/Up."""
    out: list[GUIAction] = []
    held: list[str] = []  # keys held by keyDown
    held_used = False  # whether a chord was emitted since the last keyDown
    drag_start: tuple | None = None  # set between mouseDown and mouseUp
    cursor: tuple[int, int] | None = None
    for call in calls:
        name = call.func
        if call.module == "time" or name == "sleep":
            _bind(call)
            out.append(GUIAction("wait"))
            continue
        args = _bind(call)
        pointer = name in _FIXED_CLICKS or name in ("moveTo", "dragTo", "mouseDown", "mouseUp")
        if pointer and held:
            raise ActionError(f"line {call.line}: mouse actions while holding {'+'.join(held)} are not supported")
        if drag_start is not None and name not in ("moveTo", "mouseUp", "dragTo"):
            raise ActionError(f"line {call.line}: {name}() between mouseDown() and mouseUp() is not supported")
        if name in _FIXED_CLICKS:
            x, y = _point(args, call, space, notes, required=False)
            button = _FIXED_BUTTON.get(name) or _button(args, call)
            clicks = _FIXED_CLICKS[name] or _int(args.get("clicks", 1), "clicks", call)
            kind = _CLICK_KINDS.get((button, clicks))
            if kind is None:
                raise ActionError(f"line {call.line}: {clicks} clicks with the {button} button is not supported")
            out.append(GUIAction(kind, x=x, y=y))
            cursor = (x, y) if x is not None else cursor
        elif name == "moveTo":
            x, y = _point(args, call, space, notes, required=True)
            if drag_start is None:
                out.append(GUIAction("move", x=x, y=y))
            cursor = (x, y)
        elif name == "dragTo":
            if _button(args, call) != "left":
                raise ActionError(f"line {call.line}: dragging with a non-left button is not supported")
            x2, y2 = _point(args, call, space, notes, required=True)
            start = _take_move(out)
            out.append(GUIAction("drag", x=start[0], y=start[1], x2=x2, y2=y2))
            cursor = (x2, y2)
        elif name == "mouseDown":
            if _button(args, call) != "left":
                raise ActionError(f"line {call.line}: mouseDown() with a non-left button is not supported")
            if drag_start is not None:
                raise ActionError(f"line {call.line}: mouseDown() twice without mouseUp()")
            x, y = _point(args, call, space, notes, required=False)
            if x is not None:
                cursor = (x, y)
            else:
                _take_move(out)
            drag_start = cursor or (None, None)
        elif name == "mouseUp":
            if _button(args, call) != "left":
                raise ActionError(f"line {call.line}: mouseUp() with a non-left button is not supported")
            if drag_start is None:
                raise ActionError(f"line {call.line}: mouseUp() without mouseDown()")
            x, y = _point(args, call, space, notes, required=False)
            end = (x, y) if x is not None else cursor
            if end is None or end == drag_start:
                out.append(GUIAction("click", x=drag_start[0], y=drag_start[1]))
            else:
                out.append(GUIAction("drag", x=drag_start[0], y=drag_start[1], x2=end[0], y2=end[1]))
            cursor, drag_start = end, None
        elif name in ("scroll", "vscroll", "hscroll"):
            x, y = _point(args, call, space, notes, required=False)
            amount = _int(args.get("clicks"), "clicks", call)
            if abs(amount) > MAX_CLICK_SCROLL:
                raise ActionError(f"line {call.line}: scroll of {amount} clicks; at most {MAX_CLICK_SCROLL}")
            if name == "hscroll":
                out.append(GUIAction("scroll", x=x, y=y, dx=amount))
            else:
                out.append(GUIAction("scroll", x=x, y=y, dy=amount))
        elif name in ("write", "typewrite"):
            message = args.get("message")
            if isinstance(message, str):
                out.append(GUIAction("type", text=message))
            elif isinstance(message, list):
                out.extend(_press(k, held) for k in message)
            else:
                raise ActionError(f"line {call.line}: {name}() needs a string")
        elif name == "press":
            keys = args.get("keys")
            names = keys if isinstance(keys, list) else [keys]
            presses = _int(args.get("presses", 1), "presses", call)
            if not 1 <= presses <= MAX_PRESSES or len(names) * presses > MAX_PRESSES:
                raise ActionError(f"line {call.line}: press() of {len(names) * presses} keys; at most {MAX_PRESSES}")
            for _ in range(presses):
                for key in names:
                    out.append(_press(key, held))
            held_used = held_used or bool(held)
        elif name == "hotkey":
            out.append(GUIAction("key", keys=[*held, *normalize_chord(args["keys"])]))
            held_used = held_used or bool(held)
        elif name == "keyDown":
            held.append(normalize_key(args.get("key")))
            held_used = False
        elif name == "keyUp":
            key = normalize_key(args.get("key"))
            if key not in held:
                raise ActionError(f"line {call.line}: keyUp({key!r}) without keyDown")
            if not held_used:  # the first release ends the chord of everything held
                out.append(GUIAction("key", keys=list(held)))
                held_used = True
            held.remove(key)
    if held:
        raise ActionError(f"keyDown({held[0]!r}) without keyUp")
    if drag_start is not None:
        raise ActionError("mouseDown() without mouseUp()")
    return out


def _press(key: object, held: list[str]) -> GUIAction:
    """pyautogui.press('A') types a capital A (pyautogui adds shift): keep that instead of lower-casing it."""
    if not held and isinstance(key, str) and len(key) == 1 and key.isupper():
        return GUIAction("type", text=key)
    return GUIAction("key", keys=[*held, normalize_key(key)])


def _bind(call: SafeCall) -> dict:
    if call.func == "hotkey":
        keys = call.args[0] if len(call.args) == 1 and isinstance(call.args[0], list) else call.args
        extra = set(call.kwargs) - _IGNORED_KWARGS
        if extra:
            raise ActionError(f"line {call.line}: hotkey() got unexpected argument {sorted(extra)[0]!r}")
        return {"keys": keys}
    names = _SIGNATURES[call.func]
    if len(call.args) > len(names):
        raise ActionError(f"line {call.line}: {call.func}() got {len(call.args)} positional arguments")
    bound = dict(zip(names, call.args, strict=False))
    for key, value in call.kwargs.items():
        if key not in names and key not in _IGNORED_KWARGS:
            raise ActionError(f"line {call.line}: {call.func}() got unexpected argument {key!r:.30}")
        if key in bound:
            raise ActionError(f"line {call.line}: {call.func}() got {key!r} twice")
        bound[key] = value
    return bound


def _point(args: dict, call: SafeCall, space: CoordinateSpace, notes: list[str], *, required: bool):
    x, y = args.get("x"), args.get("y")
    if isinstance(x, Mark) or isinstance(y, Mark):  # click(tag_3): the mark stands for the whole point
        if not isinstance(x, Mark) or y is not None:
            raise ActionError(f"line {call.line}: {call.func}() takes a mark alone, as its point: {call.func}(tag_3)")
        return space.mark(x.number)
    if isinstance(x, list) and y is None:  # click((x, y))
        if len(x) != 2:
            raise ActionError(f"line {call.line}: {call.func}() point must be (x, y)")
        x, y = x
    if x is None and y is None:
        if required:
            raise ActionError(f"line {call.line}: {call.func}() needs x and y")
        return None, None
    if isinstance(x, str) or isinstance(y, str):
        raise ActionError(
            f"line {call.line}: {call.func}() needs numeric coordinates (locating images is not supported)"
        )
    if x is None or y is None:
        raise ActionError(f"line {call.line}: {call.func}() needs both x and y")
    return space.to_screen(x, y, notes)


def _button(args: dict, call: SafeCall) -> str:
    button = args.get("button", "left")
    if not isinstance(button, str) or button not in _BUTTONS:
        raise ActionError(f"line {call.line}: unknown mouse button {button!r:.20}")
    return _BUTTONS[button]


def _int(value: object, what: str, call: SafeCall) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ActionError(f"line {call.line}: {call.func}() needs a number for {what}")
    return int(round(value))


def _take_move(out: list[GUIAction]) -> tuple[int | None, int | None]:
    """A drag that follows moveTo starts at that point: fold the move into the drag."""
    if out and out[-1].kind == "move":
        move = out.pop()
        return move.x, move.y
    return None, None


def render_code(fmt: str, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
    """The writer behind `PyAutoGUIFormat.render`: allow-listed calls with literal (repr) arguments only."""
    body = [a for a in actions if a.kind not in TERMINAL_KINDS]
    terminal = [a for a in actions if a.kind in TERMINAL_KINDS]
    for a in terminal:
        if a.text is not None:
            raise cannot(fmt, a, f"the word {a.kind.upper()} carries no text")
    for a in body:
        if a.kind == "move" and a.x is None:
            raise cannot(fmt, a, "moveTo() needs x and y")
    if space.width != space.screen_w or space.height != space.screen_h:
        raise ActionError(f"{fmt} writes screen pixels; got a {space.width}x{space.height} coordinate space")
    prose = [thought] if thought else []
    word = [terminal[-1].kind.upper()] if terminal else []
    if not body:
        return "\n".join(prose + word)
    try:
        code = render_pyautogui(body)
    except ValueError as exc:
        raise ActionError(f"{fmt}: {exc}") from None
    if code == "WAIT":  # a lone wait: the bare word, or its line of code when DONE/FAIL follows
        if not word:
            return "\n".join(prose + ["WAIT"])
        code = f"time.sleep({WAIT_SECONDS})"
    # backticks only occur inside repr() string literals here; escaped, a typed "```" cannot close the fence
    code = code.replace("`", "\\x60")
    return "\n".join(prose + [f"```python\n{code}\n```"] + word)
