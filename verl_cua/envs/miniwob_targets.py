"""Ground truth read from a MiniWoB++ task page's DOM: its elements with their boxes, and the one element a click
must hit on single-target tasks (what the scripted oracle, the blind baseline and the grounding figures measure
against). Never shown to an agent."""

from __future__ import annotations

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


def target_box(env: MiniWoBEnv, task: str) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) in task-area CSS pixels of the one element a click must hit (single-target tasks)."""
    tags = {"click-test": "BUTTON", "focus-text": "INPUT_text"}
    if task not in tags:
        raise ValueError(f"no single click target for {task!r}; supported: {', '.join(tags)}")
    element = next(e for e in dom_elements(env) if e["tag"] == tags[task])
    return element["left"], element["top"], element["left"] + element["width"], element["top"] + element["height"]
