"""docs/python_loop.md runs as written: its Python blocks, executed in order in one namespace, play a MiniWoB++ episode
in a real headless Chromium with the page's stand-in model, print what the page says they print, and close the
browser; its `call_model` sends a body `verl-cua serve` accepts. Negative controls: a block with a broken import or
syntax fails the runner, and a stand-in that misses the button fails the checks."""

import io
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from PIL import Image

from verl_cua.actions.conversation import first_turn
from verl_cua.actions.prompts import build_prompt
from verl_cua.serve.chat import parse_request
from verl_cua.testing.chat_server import ScriptedChatServer

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python_loop.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)
CLICK = "```python\npyautogui.click(80, 105)\n```"
MISS = "```python\npyautogui.click(1, 1)\n```"  # the corner of click-test's page, where no button is


def page_blocks(lang: str) -> list[str]:
    """The page's fenced blocks of `lang`, in order."""
    return [body for found, body in BLOCK.findall(PAGE.read_text()) if found == lang]


def the_block(blocks: list[str], defines: str) -> int:
    """The index of the one block that contains `defines`."""
    (index,) = [i for i, block in enumerate(blocks) if defines in block]
    return index


def run_blocks(blocks: list[str]) -> tuple[dict, str]:
    """Execute `blocks` in order in one namespace, as a reader's script would; returns it and what they printed. When
    a block fails, the env it left (if any) is closed before the error goes on; after a clean run the page's own
    `close` is what `check_loop` checks."""
    namespace: dict = {"__name__": "python_loop_page"}
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            for i, block in enumerate(blocks, 1):
                exec(compile(block, f"{PAGE.name}, python block {i}", "exec"), namespace)
    except BaseException:
        if namespace.get("env") is not None:
            namespace["env"].close()
        raise
    return namespace, out.getvalue()


def check_loop(namespace: dict, printed: str) -> None:
    """What the page says its loop does: one valid click at the centre of the page's button solves click-test (reward
    and score 1.0), the browser is closed, the output is the page's `text` block, and the invalid reply is refused."""
    obs, action, result = namespace["obs"], namespace["action"], namespace["result"]
    button = next(e for e in obs.extra["elements"] if e.tag == "button")
    assert action.valid and [(a.kind, a.x, a.y) for a in action.actions] == [("click", *button.centre)], action
    assert result.info["action_valid"] and not result.info["infra_failure"], result.info
    assert namespace["step"] == 1 and result.done and result.reward == 1.0 and namespace["score"] == 1.0
    assert namespace["env"].pids() == []  # the `finally` quit the browser and its driver
    (expected,) = page_blocks("text")
    wanted = [re.escape(line).replace(re.escape("..."), ".*") for line in expected.splitlines()]
    lines = printed.splitlines()
    assert all(re.fullmatch(w, line) for w, line in zip(wanted, lines, strict=False)), (expected, printed)
    bad = namespace["bad"]
    assert not bad.valid and not bad.actions and "no ```python code block" in bad.error
    assert f"False {bad.error}" in lines and any(line.startswith("unknown action format 'qwen4'") for line in lines)


def test_the_page_has_a_model_call_a_stand_in_the_loop_and_an_invalid_reply():
    blocks = page_blocks("python")
    assert len(blocks) == 4, len(blocks)
    found = [the_block(blocks, name) for name in ("def call_model", "def stand_in_model", "env.step(", "bad =")]
    assert found == [0, 1, 2, 3], found
    assert "model = stand_in_model  # your model: call_model" in blocks[2]  # the stand-in is named as one


def test_the_page_runs_in_real_chromium_and_its_stand_in_solves_click_test(chromium):
    namespace, printed = run_blocks(page_blocks("python"))
    check_loop(namespace, printed)


def test_a_stand_in_that_misses_the_button_fails_the_checks(chromium):
    blocks = page_blocks("python")
    i = the_block(blocks, "def stand_in_model")
    blocks[i] = f"def stand_in_model(messages):\n    return {MISS!r}\n"
    namespace, printed = run_blocks(blocks)
    assert namespace["step"] == 5 and namespace["score"] == 0.0 and not namespace["result"].done
    with pytest.raises(AssertionError):
        check_loop(namespace, printed)


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("import build_prompt, parse_action", "import build_prompts, parse_action", ImportError),
        ("for step in range(1, 6):", "for step in range(1, 6)", SyntaxError),
    ],
    ids=["renamed-import", "syntax"],
)
def test_a_broken_block_fails_the_runner(old, new, error):
    blocks = page_blocks("python")
    i = the_block(blocks, old)
    blocks[i] = blocks[i].replace(old, new)
    with pytest.raises(error) as caught:
        run_blocks(blocks)
    where = caught.value.filename if error is SyntaxError else caught.traceback[-1].path
    assert str(where) == f"{PAGE.name}, python block {i + 1}"


def test_call_model_sends_what_verl_cua_serve_accepts():
    blocks = page_blocks("python")
    namespace, _ = run_blocks(blocks[: the_block(blocks, "def call_model") + 1])
    spec = build_prompt("pyautogui", screen=(160, 210))
    messages = first_turn(spec, "Click the button.", Image.new("RGB", (160, 210), "white"))
    server = ScriptedChatServer({"button": [CLICK]})
    try:
        assert namespace["call_model"](messages, base_url=server.url) == CLICK
    finally:
        server.close()
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    parsed = parse_request(request["body"], "policy")  # what `verl-cua serve --served-model-name policy` reads
    assert [image.size for image in parsed.images] == [(160, 210)]
    assert [m["role"] for m in parsed.messages] == ["system", "user"]
