"""CODA's executor over HTTP, against the scripted chat server on 127.0.0.1: what one request carries, the reply the
format parses, and a down, slow, refusing or garbling executor as `ExecutorUnavailable` (infra) within bounded time."""

import asyncio
import io
import pickle
import socket
import subprocess
import sys
import threading
import time

import pytest
from PIL import Image

from verl_cua.actions import parse_action
from verl_cua.eval.executor import (
    EXECUTORS,
    ExecutorSettings,
    ExecutorUnavailable,
    OpenAIExecutor,
    make_executor,
)
from verl_cua.testing.chat_server import Raw, ScriptedChatServer, request_images

PROMPT = "You are a GUI agent.\n## User Instruction\nOpen the wifi settings"
THOUGHT = "The wifi switch is at the top right; click the 'Wi-Fi' toggle."
CLICK = "click(start_box='(120,45)')"


def payload(thought: str = THOUGHT) -> tuple[list[dict], list[Image.Image]]:
    """CODA's executor payload: the prompt as the user, one history step, two screenshots, the thought to continue."""
    previous, current = Image.new("RGB", (320, 200), (10, 20, 30)), Image.new("RGB", (320, 200), (200, 100, 50))
    buffer = io.BytesIO()
    current.save(buffer, format="PNG")
    messages = [
        {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Open the menu.\nAction: click(start_box='(5,5)')"}],
        },
        {"role": "user", "content": [{"type": "image", "image": previous}]},
        {"role": "user", "content": [{"type": "image", "image": buffer.getvalue()}]},  # PNG bytes, sent as they are
        {"role": "assistant", "content": [{"type": "text", "text": thought + "\nAction: "}]},
    ]
    return messages, [previous, current]


def settings(server_url: str, **overrides) -> ExecutorSettings:
    """Fast settings for tests: short timeouts and backoff."""
    values = {"base_url": server_url, "model": "tars1.5-grounding", "timeout_s": 5.0, "retries": 2, "backoff_s": 0.01}
    return ExecutorSettings(**{**values, **overrides})


def test_the_request_carries_the_prompt_the_two_screenshots_and_the_thought_with_the_settings(chat_server):
    server = chat_server({}, fallback=CLICK)
    executor = OpenAIExecutor(settings(server.url, temperature=0.25, max_tokens=64, extra_body={"top_k": 1}))
    messages, images = payload()
    reply = executor.act(messages)
    (request,) = server.requests
    body = request["body"]
    assert request["path"] == "/v1/chat/completions"
    assert "authorization" not in {k.lower() for k in request["headers"]}  # api_key_env None: no key
    assert (body["model"], body["temperature"], body["max_tokens"], body["top_k"]) == ("tars1.5-grounding", 0.25, 64, 1)
    first = body["messages"][0]
    assert first["role"] == "user" and first["content"] == [{"type": "text", "text": PROMPT}]
    parts = [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(urls) == 2 and all(u.startswith("data:image/png;base64,") for u in urls)
    sent = request_images(body)
    assert [s.tobytes() for s in sent] == [i.tobytes() for i in images]
    assert body["messages"][1]["content"] == "Open the menu.\nAction: click(start_box='(5,5)')"  # text only: a string
    assert body["messages"][-1] == {"role": "assistant", "content": THOUGHT + "\nAction: "}
    # a reply that continues the thought is parsed with the thought before it
    assert reply.raw == CLICK and reply.text == THOUGHT + "\nAction: " + CLICK and reply.attempts == 1
    parsed = parse_action(reply.text, format="uitars", screen=(1280, 800), image=(1280, 800))
    assert parsed.valid and (parsed.actions[0].x, parsed.actions[0].y) == (120, 45)
    assert parsed.thought == THOUGHT
    assert executor.stats.snapshot() == {
        "calls": 1,
        "failures": 0,
        "retries": 0,
        "seconds": pytest.approx(reply.seconds),
    }


def test_a_reply_with_its_own_action_line_is_returned_as_it_is_and_the_key_is_sent(chat_server, monkeypatch):
    own = "Thought: toggling wifi\nAction: " + CLICK
    server = chat_server({"wifi": [None, None, own]})  # turn 2: the history's and the final assistant message
    monkeypatch.setenv("EXECUTOR_TEST_KEY", "sk-test")
    reply = OpenAIExecutor(settings(server.url, api_key_env="EXECUTOR_TEST_KEY")).act(payload()[0])
    assert reply.text == reply.raw == own
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-test"


def test_an_unset_key_variable_is_one_line_naming_it(monkeypatch):
    monkeypatch.delenv("EXECUTOR_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="EXECUTOR_TEST_KEY.*not set"):
        OpenAIExecutor(ExecutorSettings(api_key_env="EXECUTOR_TEST_KEY"))


def test_a_503_is_retried_then_unavailable_in_one_line(chat_server):
    server = chat_server({}, status=503)
    executor = OpenAIExecutor(settings(server.url, retries=2))
    with pytest.raises(ExecutorUnavailable) as caught:
        executor.act(payload()[0])
    message = str(caught.value)
    assert "\n" not in message and server.url in message and "tars1.5-grounding" in message
    assert "3 attempt" in message and "HTTP 503" in message
    assert (caught.value.kind, caught.value.status, caught.value.attempts) == ("retryable", 503, 3)
    assert len(server.requests) == 3
    stats = executor.stats.snapshot()
    assert (stats["calls"], stats["failures"], stats["retries"]) == (1, 1, 2)
    copy = pickle.loads(pickle.dumps(caught.value))  # crosses process boundaries (Ray workers) intact
    assert str(copy) == message and copy.kind == "retryable"


@pytest.mark.parametrize(("status", "kind"), [(400, "rejected"), (422, "rejected"), (401, "fatal"), (404, "fatal")])
def test_a_refusing_status_is_unavailable_at_once_without_a_retry(chat_server, status, kind):
    server = chat_server({}, status=status)
    executor = OpenAIExecutor(settings(server.url, retries=3))
    with pytest.raises(ExecutorUnavailable, match=f"1 attempt.*HTTP {status}") as caught:
        executor.act(payload()[0])
    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert len(server.requests) == 1 and executor.stats.snapshot()["retries"] == 0


def test_a_body_that_is_no_reply_is_retried_then_unavailable(chat_server):
    server = chat_server({"wifi": [None, None, Raw(None)]})
    with pytest.raises(ExecutorUnavailable, match="unusable response") as caught:
        OpenAIExecutor(settings(server.url, retries=1)).act(payload()[0])
    assert caught.value.kind == "retryable" and len(server.requests) == 2


def test_a_dead_port_is_unavailable_within_the_timeout():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    executor = OpenAIExecutor(settings(f"http://127.0.0.1:{port}/v1", retries=1, timeout_s=2.0))
    start = time.monotonic()
    with pytest.raises(ExecutorUnavailable, match=f"127.0.0.1:{port}.*2 attempt.*Connect") as caught:
        executor.act(payload()[0])
    assert time.monotonic() - start < 10 and caught.value.status == 0
    assert executor.stats.snapshot()["failures"] == 1


class SlowServer(ScriptedChatServer):
    """Answers only after `release` is set (at most 10 s): slower than any executor timeout here."""

    def __init__(self):
        super().__init__({}, fallback=CLICK)
        self.release = threading.Event()
        self.httpd.handle_error = lambda *args: None  # the client is gone by the time it answers

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        """The scripted answer, late."""
        self.release.wait(10)
        return super().answer(path, body)


def test_a_slow_server_is_unavailable_after_the_timeout_not_a_hang():
    server = SlowServer()
    try:
        executor = OpenAIExecutor(settings(server.url, timeout_s=0.5, retries=1))
        start = time.monotonic()
        with pytest.raises(ExecutorUnavailable, match=r"2 attempt.*timed out after 0\.5 s"):
            executor.act(payload()[0])
        assert time.monotonic() - start < 10  # 2 x 0.5 s and the backoff; generous for a loaded machine
        assert len(server.requests) == 2
    finally:
        server.release.set()
        server.close()


def test_act_async_runs_calls_side_by_side_and_counts_each(chat_server):
    server = chat_server({}, fallback=CLICK)
    executor = make_executor(settings(server.url))

    async def main():
        return await asyncio.gather(*(executor.act_async(payload(f"step {i}: click 'OK'")[0]) for i in range(4)))

    replies = asyncio.run(main())
    executor.close()
    assert [r.raw for r in replies] == [CLICK] * 4 and len(server.requests) == 4
    assert sorted(r["body"]["messages"][-1]["content"] for r in server.requests) == [
        f"step {i}: click 'OK'\nAction: " for i in range(4)
    ]
    assert executor.stats.snapshot()["calls"] == 4


def test_an_unknown_kind_or_format_is_one_line_naming_the_valid_ones():
    with pytest.raises(
        ValueError, match="unknown executor kind 'ui-tars'; valid executor kinds: openai, standin_grounding"
    ):
        make_executor(ExecutorSettings(kind="ui-tars"))
    with pytest.raises(ValueError, match="unknown action format 'tars'.*uitars"):
        make_executor(ExecutorSettings(format="tars"))
    assert EXECUTORS.built_in() == ["openai", "standin_grounding"]


def test_the_stand_in_kind_is_imported_only_when_made():
    code = (
        "import sys\n"
        "from verl_cua.eval.executor import ExecutorSettings, make_executor\n"
        "assert 'verl_cua.testing.grounding_standin' not in sys.modules\n"
        "print(type(make_executor(ExecutorSettings(kind='standin_grounding'), screen=(800, 600))).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "GroundingStandIn"


def test_settings_refuse_unknown_keys_and_bad_values_in_one_line():
    assert ExecutorSettings.from_mapping({"model": "m", "retries": 0}).retries == 0
    with pytest.raises(ValueError, match="unknown executor setting.*tempreature; valid: kind, base_url"):
        ExecutorSettings.from_mapping({"tempreature": 0.1})
    with pytest.raises(ValueError, match="timeout_s must be > 0.*retries must be an integer"):
        ExecutorSettings(timeout_s=0, retries=-1)
    with pytest.raises(ValueError, match="base_url must start with http"):
        ExecutorSettings(base_url="localhost:8000/v1")


def test_a_content_part_of_an_unknown_type_is_one_line_naming_the_valid_ones():
    messages = [{"role": "user", "content": [{"type": "video", "video": b""}]}]
    with pytest.raises(ValueError, match="type 'video'; valid types: text, image, image_url"):
        OpenAIExecutor(ExecutorSettings()).body(messages)
