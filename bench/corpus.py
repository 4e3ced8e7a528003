"""Deterministic corpora of real-looking model outputs per format, benign and truncated/mutated (bench and tests)."""

from __future__ import annotations

import json
import random

from verl_cua.actions.geometry import QWEN25VL_RESIZE, UITARS_RESIZE, smart_resize_size

SCREENS = [(1920, 1080), (1280, 720), (1366, 768), (2560, 1440), (1024, 768)]
THOUGHTS = [
    "The File menu is in the top-left corner; I will open it.",
    "I need to select cell B2 before typing the total.",
    "The dialog asks whether to keep the format, so I confirm.",
    "The search box is empty, I will click on it first.",
    "Scrolling down should reveal the Submit button.",
]
TEXTS = ["quarterly report", "=SUM(A1:A10)", "hello world\n", "Alice's notes", "42"]
KEYS = [["ctrl", "s"], ["ctrl", "c"], ["enter"], ["alt", "f4"], ["ctrl", "shift", "t"], ["tab"]]


def uitars_output(rng: random.Random, screen: tuple[int, int]) -> str:
    """A UI-TARS-1.5 output in a syntax the ui-tars package also parses ('(x,y)' and '<point>x y</point>')."""
    w, h = smart_resize_size(screen, **UITARS_RESIZE)

    def box() -> str:
        x, y = rng.randrange(w), rng.randrange(h)
        return rng.choice([f"({x},{y})", f"<point>{x} {y}</point>"])

    kind = rng.randrange(9)
    if kind == 0:
        action = f"click(start_box='{box()}')"
    elif kind == 1:
        action = f"left_double(start_box='{box()}')"
    elif kind == 2:
        action = f"right_single(start_box='{box()}')"
    elif kind == 3:
        action = f"drag(start_box='{box()}', end_box='{box()}')"
    elif kind == 4:
        action = f"hotkey(key='{' '.join(rng.choice(KEYS))}')"
    elif kind == 5:
        action = (
            f"type(content='{rng.choice(TEXTS).replace(chr(10), chr(92) + 'n').replace(chr(39), chr(92) + chr(39))}')"
        )
    elif kind == 6:
        action = f"scroll(start_box='{box()}', direction='{rng.choice(['up', 'down', 'left', 'right'])}')"
    elif kind == 7:
        action = "wait()"
    else:
        action = f"click(point='{box()}')"
    return f"Thought: {rng.choice(THOUGHTS)}\nAction: {action}"


def computer_use_output(rng: random.Random, size: tuple[int, int]) -> str:
    """A Qwen-VL computer_use tool call, coordinates within `size`."""

    def xy() -> list[int]:
        return [rng.randrange(size[0]), rng.randrange(size[1])]

    kind = rng.randrange(7)
    if kind < 3:
        args = {"action": ["left_click", "double_click", "right_click"][kind], "coordinate": xy()}
    elif kind == 3:
        args = {"action": "type", "text": rng.choice(TEXTS)}
    elif kind == 4:
        args = {"action": "key", "keys": rng.choice(KEYS)}
    elif kind == 5:
        args = {"action": "scroll", "pixels": rng.choice([-5, 5, -10]), "coordinate": xy()}
    else:
        args = {"action": "terminate", "status": "success"}
    call = json.dumps({"name": "computer_use", "arguments": args})
    return f"{rng.choice(THOUGHTS)}\n<tool_call>\n{call}\n</tool_call>"


def pyautogui_output(rng: random.Random, screen: tuple[int, int]) -> str:
    """OSWorld-style prose plus a ```python block."""
    x, y = rng.randrange(screen[0]), rng.randrange(screen[1])
    kind = rng.randrange(6)
    if kind == 0:
        code = f"pyautogui.click({x}, {y})"
    elif kind == 1:
        code = f"pyautogui.moveTo({x}, {y})\npyautogui.dragTo({y}, {y}, duration=0.5)"
    elif kind == 2:
        code = f"pyautogui.click({x}, {y})\npyautogui.write({rng.choice(TEXTS)!r})\npyautogui.press('enter')"
    elif kind == 3:
        code = f"pyautogui.hotkey({', '.join(repr(k) for k in rng.choice(KEYS))})"
    elif kind == 4:
        code = f"pyautogui.scroll(-5, x={x}, y={y})"
    else:
        return rng.choice(["WAIT", "DONE", "FAIL"])
    return f"{rng.choice(THOUGHTS)}\n```python\nimport pyautogui\n{code}\n```"


def claude_output(rng: random.Random, screen: tuple[int, int]) -> str:
    """An Anthropic computer-tool input."""
    x, y = rng.randrange(screen[0]), rng.randrange(screen[1])
    kind = rng.randrange(5)
    if kind == 0:
        data = {"action": "left_click", "coordinate": [x, y]}
    elif kind == 1:
        data = {"action": "type", "text": rng.choice(TEXTS)}
    elif kind == 2:
        data = {"action": "key", "text": "+".join(rng.choice(KEYS))}
    elif kind == 3:
        data = {"action": "scroll", "coordinate": [x, y], "scroll_direction": "down", "scroll_amount": 3}
    else:
        data = {"action": "left_click_drag", "start_coordinate": [x, y], "coordinate": [y, x % screen[1]]}
    return json.dumps(data)


def mutate(rng: random.Random, text: str) -> str:
    """Truncate at a random point (as at a token limit), or drop/duplicate/replace a few characters."""
    choice = rng.randrange(3)
    if choice == 0 or len(text) < 4:
        return text[: rng.randrange(len(text) + 1)]
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(chars))
        op = rng.randrange(3)
        if op == 0:
            del chars[i]
        elif op == 1:
            chars.insert(i, chars[i])
        else:
            chars[i] = rng.choice("()'\",<>[]{}: \n0a")
    return "".join(chars)


def corpus(fmt: str, n: int, *, mutated: float = 0.5, seed: int = 0) -> list[tuple[str, tuple[int, int]]]:
    """`n` (text, screen) pairs for `fmt`; a `mutated` share of them truncated or mutated."""
    rng = random.Random(f"{fmt}-{seed}")
    out = []
    for _ in range(n):
        screen = rng.choice(SCREENS)
        if fmt == "uitars":
            text = uitars_output(rng, screen)
        elif fmt == "qwen3vl":
            text = computer_use_output(rng, (1000, 1000))
        elif fmt == "qwen25vl":
            text = computer_use_output(rng, smart_resize_size(screen, **QWEN25VL_RESIZE))
        elif fmt == "pyautogui":
            text = pyautogui_output(rng, screen)
        elif fmt == "claude":
            text = claude_output(rng, screen)
        else:
            raise ValueError(f"no corpus for format {fmt!r}")
        if rng.random() < mutated:
            text = mutate(rng, text)
        out.append((text, screen))
    return out
