"""A scripted MiniWoB++ solver that reads the task's DOM: ground truth for tests and benchmarks, not an agent."""

from __future__ import annotations

from verl_cua.envs.base import Observation
from verl_cua.envs.miniwob import MiniWoBEnv

SUPPORTED_TASKS = ("click-button", "click-test", "enter-text", "focus-text")


def dom_elements(env: MiniWoBEnv) -> list[dict]:
    """Every element of the current task page, flattened, with task-area CSS boxes."""
    instance = env._instance()
    root = instance.driver.execute_script("return core.getDOMInfo();")
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.get("children", [])))
    return out


def target_box(env: MiniWoBEnv, task: str) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) in task-area CSS pixels of the one element a click must hit (single-target tasks)."""
    tags = {"click-test": "BUTTON", "focus-text": "INPUT_text"}
    if task not in tags:
        raise ValueError(f"no single click target for {task!r}; supported: {', '.join(tags)}")
    element = next(e for e in dom_elements(env) if e["tag"] == tags[task])
    return element["left"], element["top"], element["left"] + element["width"], element["top"] + element["height"]


def center(element: dict, scale: int) -> tuple[int, int]:
    """The element's centre in screenshot pixels."""
    return int((element["left"] + element["width"] / 2) * scale), int((element["top"] + element["height"] / 2) * scale)


def solution(env: MiniWoBEnv, obs: Observation, *, wrong: bool = False) -> list[str]:
    """pyautogui outputs that solve the current episode (or, with `wrong=True`, click a wrong target)."""
    task, scale = obs.extra["task"], env.scale
    elements = dom_elements(env)
    fields = dict(obs.extra.get("fields", []))
    if task == "click-button":
        buttons = [e for e in elements if e["tag"] == "BUTTON"]
        target = fields["target"]  # exact: a page may show both "yes" and "Yes", and only one of them counts
        pick = (
            [b for b in buttons if (b.get("text") or "") != target]
            if wrong
            else [b for b in buttons if (b.get("text") or "") == target]
        )
        return [_click(*center(pick[0], scale))]
    if task == "click-test":
        button = next(e for e in elements if e["tag"] == "BUTTON")
        return [_click(*center(button, scale))]
    if task in ("enter-text", "focus-text"):
        field = next(e for e in elements if e["tag"] == "INPUT_text")
        steps = [_click(*center(field, scale))]
        if task == "enter-text":
            submit = next(e for e in elements if e["tag"] == "BUTTON")
            typed = fields["target"] if not wrong else fields["target"] + "x"
            steps += [f"```python\npyautogui.write({typed!r})\n```", _click(*center(submit, scale))]
        return steps
    raise ValueError(f"no scripted solution for {task!r}; supported: {', '.join(SUPPORTED_TASKS)}")


def _click(x: int, y: int) -> str:
    return f"```python\npyautogui.click({x}, {y})\n```"
