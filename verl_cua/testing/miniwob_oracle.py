"""A scripted MiniWoB++ solver that reads the task's DOM: ground truth for tests and benchmarks, not an agent."""

from __future__ import annotations

from verl_cua.envs.base import Observation
from verl_cua.envs.miniwob import MiniWoBEnv
from verl_cua.envs.miniwob_targets import dom_elements

SUPPORTED_TASKS = ("click-button", "click-test", "enter-text", "focus-text")


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
