"""Recorded Anthropic and OpenAI-compatible responses (written here, not downloaded) become the same trajectory lines:
the same keys, the same click in screen pixels, usage in the same two fields. The desktop is a fake that records
the actions it is sent (no model or desktop needed to check the API adapters)."""

import json

import pytest
from PIL import Image

from verl_cua.actions import build_prompt, parse_action
from verl_cua.envs import EnvPool
from verl_cua.envs.task_sets import TaskRef
from verl_cua.envs.trajectory import STEP_KEYS, EpisodeWriter, read_episode
from verl_cua.eval import ChatClient, EndpointError, EpisodeSettings, run_episode
from verl_cua.eval.apis import Request, Turn, get_api
from verl_cua.testing.chat_server import Raw, ScriptedChatServer
from verl_cua.testing.recorded_replies import (
    ANTHROPIC,
    ANTHROPIC_DONE,
    INSTRUCTION,
    OPENAI_DONE,
    OPENAI_TEXT,
    OPENAI_TOOL_CALLS,
    SCREEN,
    FakeDesktop,
)


@pytest.mark.parametrize(
    "api,fmt,replies",
    [
        ("openai", "qwen3vl", [OPENAI_TEXT, OPENAI_DONE]),
        ("openai", "qwen3vl", [OPENAI_TOOL_CALLS, OPENAI_DONE]),
        ("anthropic", "claude", [ANTHROPIC, ANTHROPIC_DONE]),
    ],
    ids=["openai-text", "openai-tool-calls", "anthropic"],
)
def test_recorded_responses_become_the_same_trajectory(tmp_path, api, fmt, replies):
    server = ScriptedChatServer({"Submit": replies})
    try:
        client = ChatClient(api, "recorded", base_url=server.url, api_key="sk-test", retries=0)
        with EnvPool(FakeDesktop, 1) as pool, pool.acquire() as lease:
            writer = EpisodeWriter(tmp_path / "ep")
            result = run_episode(lease, TaskRef("fake", "submit", "forms", "submit"), client, EpisodeSettings(fmt),
                                 writer)  # fmt: skip
            writer.finish(result)
    finally:
        server.close()
    episode = read_episode(tmp_path / "ep")
    assert episode.status == "success" and result["steps"] == 2 and result["end_reason"] == "done"
    first = episode.steps[0]
    assert set(first) == set(STEP_KEYS)
    assert first["valid"] and first["action"]["format"] == fmt
    click = first["action"]["actions"][0]
    assert (click["kind"], click["x"], click["y"]) == ("click", 960, 540)
    assert first["action"]["thought"] == "The Submit button is in the middle."
    assert first["usage"] == {"prompt_tokens": 2710, "completion_tokens": 41}
    assert first["response"] == replies[0]
    assert episode.steps[1]["action"]["actions"][0]["kind"] == "done"
    asked = [step["prompt"] for step in episode.steps]  # the system prompt once, then each turn after a reply
    assert [m["role"] for m in asked[0]["messages"]] == ["system", "user"] and asked[1]["layout"] == "episode"
    assert asked[0]["messages"][1]["content"][0] == {"type": "image", "screenshot": first["screenshot"]}
    assert [m["role"] for m in asked[1]["messages"]] == ["user"] and asked[1]["history_images"] == 3
    headers = server.requests[0]["headers"]
    if api == "anthropic":
        assert headers["x-api-key"] == "sk-test" and headers["anthropic-version"] == "2023-06-01"
        assert server.requests[0]["path"] == "/v1/messages"
    else:
        assert headers["Authorization"] == "Bearer sk-test" and server.requests[0]["path"] == "/v1/chat/completions"


def _turns(reply_body, api, fmt, *, error=None, steps=3):
    """A conversation of `steps` turns whose replies are `reply_body`, parsed by the adapter itself."""
    spec = build_prompt(fmt, screen=SCREEN, image=(1280, 720) if fmt == "claude" else None)
    adapter = get_api(api)
    turns = []
    for i in range(steps):
        image = Image.new("RGB", (1280, 720), (i * 40, 0, 0))
        turns.append(Turn(image=image, text=f"turn {i}", error=error if i else None))
        if i < steps - 1:
            turns[-1].reply = adapter.reply(reply_body, Request("m", spec, turns, 2, 64, 0.0))
    return spec, adapter, turns


def test_anthropic_answers_each_tool_use_with_a_tool_result_and_the_screenshot():
    spec, adapter, turns = _turns(ANTHROPIC, "anthropic", "claude")
    body = adapter.body(Request("claude-x", spec, turns, 2, 256, 0.0))
    assert body["tools"][0]["type"] == "computer_20250124" and body["tools"][0]["display_width_px"] == 1280
    assert body["system"] == spec.system and [m["role"] for m in body["messages"]] == ["user", "assistant"] * 2 + [
        "user"
    ]
    first, second, third = body["messages"][0], body["messages"][2], body["messages"][4]
    assert first["content"][0]["type"] == "text"  # the oldest screenshot is beyond history_images=2
    result = second["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01A09q90qw90lq917835lq9"
    assert result["content"][0]["type"] == "image" and result["content"][0]["source"]["media_type"] == "image/png"
    assert third["content"][0]["type"] == "tool_result" and third["content"][-1] == {"type": "text", "text": "turn 2"}
    assert body["messages"][1]["content"] == ANTHROPIC["content"]  # Claude's own blocks go back unchanged


def test_anthropic_reports_an_invalid_action_as_a_tool_error_with_the_screen():
    spec, adapter, turns = _turns(ANTHROPIC, "anthropic", "claude", error="zoom is not supported", steps=2)
    body = adapter.body(Request("claude-x", spec, turns, 1, 256, 0.0))
    result = body["messages"][2]["content"][0]
    assert result["is_error"] is True and result["content"][0] == {"type": "text", "text": "zoom is not supported"}
    assert result["content"][1]["type"] == "image"  # the only screenshot in a one-image history


def test_an_empty_claude_turn_is_kept_as_a_placeholder():
    spec = build_prompt("claude", screen=SCREEN, image=(1280, 720))
    reply = get_api("anthropic").reply({**ANTHROPIC, "content": []}, Request("m", spec, [], 1, 64, 0.0))
    assert reply.text == "[]" and reply.message["content"] == [{"type": "text", "text": "(no reply)"}]
    assert not parse_action(reply.text, format="claude", screen=SCREEN, image=(1280, 720)).valid


@pytest.mark.parametrize("body", [None, [], {"choices": [{"message": {"tool_calls": ["x"]}}]}, {"choices": "x"}])
def test_malformed_bodies_are_retryable_endpoint_errors(body):
    server = ScriptedChatServer({"Submit": [Raw(body)]})
    try:
        client = ChatClient("openai", "m", base_url=server.url, retries=0)
        spec = build_prompt("qwen3vl", screen=SCREEN)
        with pytest.raises(EndpointError, match="unusable response") as info:
            client.complete(spec, [Turn(image=None, text=INSTRUCTION)], 1)
        assert info.value.kind == "retryable"
    finally:
        server.close()


def test_the_client_gives_up_after_a_run_of_failed_requests():
    server = ScriptedChatServer({}, status=503)
    try:
        client = ChatClient("openai", "m", base_url=server.url, retries=0, give_up_after=3)
        spec = build_prompt("qwen3vl", screen=SCREEN)
        kinds = []
        for _ in range(4):
            with pytest.raises(EndpointError) as info:
                client.complete(spec, [Turn(image=None, text=INSTRUCTION)], 1)
            kinds.append(info.value.kind)
        assert kinds == ["retryable", "retryable", "fatal", "fatal"] and "in a row; giving up" in str(info.value)
    finally:
        server.close()


def test_openai_sends_the_reply_text_back_and_omits_old_screenshots():
    spec, adapter, turns = _turns(OPENAI_TOOL_CALLS, "openai", "qwen3vl")
    body = adapter.body(Request("qwen", spec, turns, 2, 256, 0.0))
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "<tool_call>" in messages[2]["content"] and '"left_click"' in messages[2]["content"]
    kinds = [[p["type"] for p in m["content"]] for m in messages if m["role"] == "user"]
    assert kinds == [["text", "text"], ["image_url", "text"], ["image_url", "text"]]
    assert json.dumps(body)  # JSON-serialisable as it is sent


def test_screenshots_are_shrunk_only_where_the_cap_is_ours():
    from verl_cua.eval.images import for_model, model_image_size

    screen = Image.new("RGB", SCREEN)
    assert for_model(screen, model_image_size("qwen3vl", SCREEN)).size == SCREEN  # the server resizes to 1920x1088
    capped = model_image_size("qwen3vl", SCREEN, max_pixels=1_003_520)
    assert capped == (1312, 736) and for_model(screen, capped).size == capped
    assert model_image_size("claude", SCREEN) == (1280, 720) and for_model(screen, (1280, 720)).size == (1280, 720)
    assert model_image_size("pyautogui", SCREEN) == SCREEN


def test_extra_body_reaches_the_request_and_max_completion_tokens_replaces_max_tokens():
    spec, adapter, turns = _turns(OPENAI_TEXT, "openai", "qwen3vl", steps=1)
    body = adapter.body(Request("gpt", spec, turns, 1, 256, 0.0, {"top_p": 0.9}))
    assert (body["max_tokens"], body["top_p"]) == (256, 0.9)
    body = adapter.body(Request("gpt", spec, turns, 1, 256, 0.0, {"max_completion_tokens": 512}))
    assert "max_tokens" not in body and body["max_completion_tokens"] == 512
