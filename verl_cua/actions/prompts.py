"""The system prompt / tool schema each format's model must be given: one source of truth for training and eval."""

from __future__ import annotations

import json
from dataclasses import dataclass

from verl_cua.actions.formats import get_format
from verl_cua.actions.formats.claude import CLAUDE_ACTIONS
from verl_cua.actions.formats.computer_use import COMPUTER_USE_ACTIONS, TOOL_NAME
from verl_cua.actions.formats.uitars import SCROLL_CLICKS
from verl_cua.actions.geometry import check_size

CLAUDE_TOOL_TYPE = "computer_20250124"


@dataclass(frozen=True)
class PromptSpec:
    """What to send a model: a system message, tool definitions for APIs that take them apart, the user turn."""

    format: str
    system: str
    tools: list[dict] | None
    coordinate_space: tuple[float, float]

    def user_text(self, instruction: str, context: str | None = None) -> str:
        """The first user turn's text (the screenshot goes beside it as an image part); `context`: `turn_context`."""
        if self.format == "uitars":
            return f"## User Instruction\n{instruction}"
        return f"Task: {instruction}" + (f"\n{context}" if context else "")


def observation_text(step: int, error: str | None = None, context: str | None = None) -> str:
    """A later user turn's text, beside the screenshot taken after `step`; `error`: why the last output was invalid;
    `context`: what the format adds each turn (`turn_context`)."""
    note = f" Your last output was not a valid action ({error})." if error else ""
    return f"Screenshot after step {step}.{note}" + (f"\n{context}" if context else "")


def turn_context(format: str, extra: dict | None) -> str | None:
    """What a format shows beside each screenshot: for `api_gui`, the focused app, the APIs it offers now and the
    last API call's result (from an observation's `extra`: `focused_app`, `api_result`); None for other formats."""
    if format != "api_gui":
        return None
    from verl_cua.actions.apis import apis_for

    extra = extra or {}
    app = extra.get("focused_app")
    apis = [a for a in apis_for(app) if a.tool != "Agent"]
    lines = [f"Focused app: {app or 'none'}."]
    if apis:
        lines += ["APIs you can call now:", *(f"  {a.signature()}" for a in apis)]
    result = extra.get("api_result")
    if result is not None:
        lines.append(f"Result of your last API call: {result}")
    return "\n".join(lines)


def longest_turn_context(format: str) -> str:
    """The longest `turn_context` of `format` (the app with the most APIs, a result at its cap): for token budgets."""
    if format != "api_gui":
        return ""
    from verl_cua.actions.apis import MAX_RESULT_CHARS, TOOLSET_REGISTRY, load_builtin_toolsets

    load_builtin_toolsets()
    result = "x" * MAX_RESULT_CHARS
    apps = [t.app for t in TOOLSET_REGISTRY.values()]
    texts = [turn_context(format, {"focused_app": app, "api_result": result}) or "" for app in apps]
    return max(texts, key=len)


def build_prompt(format: str, *, screen: tuple[int, int], image: tuple[int, int] | None = None) -> PromptSpec:
    """The prompt for `format` on a `screen`-sized desktop (`image`: the size the model sees, where it matters)."""
    screen = check_size(screen, "screen")
    if image is not None:
        image = check_size(image, "image")
    fmt = get_format(format)
    space = fmt.coordinate_space(screen, image)
    size = (int(space.width), int(space.height))
    builders = {
        "qwen3vl": _computer_use,
        "qwen25vl": _computer_use,
        "uitars": _uitars,
        "pyautogui": _pyautogui,
        "claude": _claude,
        "api_gui": _api_gui,
    }
    system, tools = builders[format](size)
    return PromptSpec(format=format, system=system, tools=tools, coordinate_space=(space.width, space.height))


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


def _computer_use(size: tuple[int, int]) -> tuple[str, list[dict]]:
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


def _uitars(size: tuple[int, int]) -> tuple[str, None]:
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


def _pyautogui(size: tuple[int, int]) -> tuple[str, None]:
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


def _claude(size: tuple[int, int]) -> tuple[str, list[dict]]:
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


def _api_gui(size: tuple[int, int]) -> tuple[str, None]:
    from verl_cua.actions.apis import apis_for
    from verl_cua.actions.formats.api_gui import SCROLL_CLICKS

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
