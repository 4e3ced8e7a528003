"""OSWorld's observation types on the real local desktop: `som` reads the desktop's AT-SPI tree every turn, lists its
elements as marks, numbers them on the screenshot, and a mark resolves to a point inside its element. (The default
`screenshot` shows no table: tests/envs/osworld/test_osworld_compat_on_cpu.py.)"""

import pytest

from verl_cua.envs import make_env
from verl_cua.envs.observation import mark_centre, marks

TERMINAL = {
    "id": "observe-terminal",
    "instruction": "Do nothing.",
    "config": [{"type": "launch", "parameters": {"command": ["gnome-terminal"]}}],
    "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"}, "expected": {}},
}


@pytest.fixture(scope="module")
def som_env(local_desktop):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.3, settle_timeout=20,
                   screen=(1024, 768), observation="som", observation_tokens=400)  # fmt: skip
    yield env
    env.close()


def test_the_desktop_s_tree_becomes_marks_drawn_on_the_screenshot(som_env):
    obs = som_env.reset(TERMINAL)
    numbered = marks(obs.extra["elements"])
    text = obs.extra["elements_text"]
    terminal = [n for n, e in enumerate(numbered, 1) if e.tag == "terminal"]
    assert terminal and f"[{terminal[0]}]\tterminal\t" in text, text[:2000]
    x, y = mark_centre(obs.extra["elements"], terminal[0])
    bx, by, bw, bh = numbered[terminal[0] - 1].box
    assert bx <= x < bx + bw and by <= y < by + bh and x < obs.screen[0] and y < obs.screen[1]
    assert obs.screenshot.getpixel((bx + 1, by + 5)) == (255, 0, 0)  # its number's tag, drawn at the box's corner
    after = som_env.step(f"pyautogui.click(tag_{terminal[0]})")  # the model names the mark; the env clicks its centre
    assert after.info["action_valid"], after.info
    assert after.observation.extra["elements_text"].startswith("Marks on the screenshot")  # each turn reads it again
