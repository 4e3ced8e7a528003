"""Ground truth read from a MiniWoB++ task page's DOM: its elements with their boxes, and the one element a click
must hit on single-target tasks (what the scripted oracle, the blind baseline and the grounding figures measure
against). Never shown to an agent."""

from __future__ import annotations

import re

from verl_cua.envs.miniwob import MiniWoBEnv


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


QUOTED = "<quoted>"  # a target's text: the word the instruction quotes ('Click on the "Ok" button.')
# The elements a task's clicks must hit, in order: (DOM tag, text or None for any)
TARGETS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "click-test": (("BUTTON", None),),
    "focus-text": (("INPUT_text", None),),
    "click-button": (("BUTTON", QUOTED),),  # the first button with the quoted text
    "click-button-sequence": (("BUTTON", "ONE"), ("BUTTON", "TWO")),  # two clicks, in this order
}


def target_boxes(env: MiniWoBEnv, task: str) -> list[tuple[float, float, float, float]]:
    """(left, top, right, bottom) in task-area CSS pixels of each element the task's clicks must hit, in order."""
    if task not in TARGETS:
        raise ValueError(f"no click targets known for {task!r}; supported: {', '.join(TARGETS)}")
    elements = dom_elements(env)
    quoted = re.search(r'"(.+?)"', env._last.instruction if env._last is not None else "")
    boxes = []
    for tag, text in TARGETS[task]:
        text = (quoted.group(1) if quoted else "") if text == QUOTED else text
        e = next(e for e in elements if e["tag"] == tag and (text is None or str(e.get("text", "")).strip() == text))
        boxes.append((e["left"], e["top"], e["left"] + e["width"], e["top"] + e["height"]))
    return boxes


def target_box(env: MiniWoBEnv, task: str) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) in task-area CSS pixels of the element the task's first click must hit."""
    return target_boxes(env, task)[0]
