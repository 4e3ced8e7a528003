"""The official `openai` client against `verl-cua serve` of the tiny random Qwen2.5-VL: what an agent harness pointed
at a trained checkpoint sees. Plain and streamed completions (the chunks joined are the plain text at temperature
0, sent token by token), `n` choices, an image, finish reasons, usage in the stream, and refusals the client raises
on with their status and the server's message."""

import base64
import io

import openai
import pytest
from PIL import Image, ImageDraw

ASK = [{"role": "user", "content": "Click the OK button."}]


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    """The official client on the served model (no retries: a refusal must surface once, as it is)."""
    return openai.OpenAI(base_url=server, api_key="unused", max_retries=0, timeout=120)


def _create(client: openai.OpenAI, **kwargs):
    return client.chat.completions.create(**{"model": "tiny", "messages": ASK, "max_tokens": 16, **kwargs})


def _streamed(client: openai.OpenAI, **kwargs) -> tuple[dict[int, str], dict[int, str], list]:
    """A streamed request: (text by choice index, finish reason by index, the chunks)."""
    chunks = list(_create(client, stream=True, **kwargs))
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    return texts, finishes, chunks


def _image_url(colour: tuple[int, int, int]) -> str:
    image = Image.new("RGB", (160, 210), (255, 255, 255))
    ImageDraw.Draw(image).rectangle((40, 80, 120, 110), fill=colour)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def test_models_list_names_the_served_model(client):
    assert [m.id for m in client.models.list()] == ["tiny"]


def test_a_streamed_completion_is_the_plain_one_sent_token_by_token(client):
    plain = _create(client, temperature=0)
    text = plain.choices[0].message.content
    assert text and plain.choices[0].finish_reason == "length"  # the random model runs into max_tokens
    assert plain.usage.completion_tokens == 16
    texts, finishes, chunks = _streamed(client, temperature=0)
    assert texts == {0: text} and finishes == {0: "length"}
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].object == "chat.completion.chunk"
    assert len({c.id for c in chunks}) == 1
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1, pieces  # sent as it was sampled, not as one piece at the end
    assert all(c.usage is None for c in chunks)  # usage only when stream_options asks for it


def test_a_stream_ends_with_the_usage_it_was_asked_for(client):
    plain = _create(client, temperature=0)
    _, _, chunks = _streamed(client, temperature=0, stream_options={"include_usage": True})
    *body, last = chunks
    assert last.choices == [] and last.usage.model_dump(include={"prompt_tokens", "completion_tokens"}) == {
        "prompt_tokens": plain.usage.prompt_tokens,
        "completion_tokens": plain.usage.completion_tokens,
    }
    assert body and all(c.usage is None for c in body)


def test_a_stop_string_ends_the_reply_with_finish_reason_stop_in_both_modes(client):
    seeded = {"seed": 5, "temperature": 1.0}  # sampled, so the reply is varied text (greedy repeats one token)
    text = _create(client, **seeded).choices[0].message.content
    cut = len(text) // 2
    stop = text[cut : cut + 2]
    expected = text[: text.find(stop)]
    assert len(stop) == 2 and expected, text
    plain = _create(client, stop=[stop], **seeded)
    assert (plain.choices[0].message.content, plain.choices[0].finish_reason) == (expected, "stop")
    assert plain.usage.completion_tokens < 16  # generation stopped at the stop string
    assert _streamed(client, stop=[stop], **seeded)[:2] == ({0: expected}, {0: "stop"})


def test_n_choices_are_sampled_one_after_another_seeded_from_the_seed_up(client):
    both = _create(client, n=2, seed=11, temperature=1.0)
    assert [c.index for c in both.choices] == [0, 1]
    first, second = (c.message.content for c in both.choices)
    assert first == _create(client, seed=11, temperature=1.0).choices[0].message.content
    assert second == _create(client, seed=12, temperature=1.0).choices[0].message.content
    assert first != second
    assert both.usage.completion_tokens == 32  # both choices counted; the prompt once
    texts, finishes, _ = _streamed(client, n=2, seed=11, temperature=1.0)
    assert texts == {0: first, 1: second} and set(finishes) == {0, 1}


def test_an_image_reaches_the_model(client):
    def ask(colour):
        content = [{"type": "image_url", "image_url": {"url": _image_url(colour)}}, {"type": "text", "text": "Click."}]
        return _create(client, messages=[{"role": "user", "content": content}], temperature=0)

    red, blue = ask((255, 0, 0)), ask((0, 0, 255))
    assert red.usage.prompt_tokens > 20 + _create(client, temperature=0).usage.prompt_tokens // 2  # image tokens
    assert red.choices[0].message.content != blue.choices[0].message.content  # the pixels changed the reply


def test_refusals_are_errors_the_client_raises_with_the_servers_message(client):
    with pytest.raises(openai.NotFoundError, match="'other' does not exist; this server serves 'tiny'"):
        _create(client, model="other")
    with pytest.raises(openai.NotFoundError, match="does not exist"):  # a stream is refused before it starts
        _create(client, model="other", stream=True)
    broken = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]
    with pytest.raises(openai.BadRequestError, match=r"messages\[0\].content\[0\]: the image does not decode"):
        _create(client, messages=broken)
    with pytest.raises(openai.BadRequestError, match="image placeholder tokens; send images as image_url parts"):
        _create(client, messages=[{"role": "user", "content": "<|vision_start|><|image_pad|><|vision_end|>"}])
    with pytest.raises(openai.BadRequestError, match="the context 600: shorten it"):
        _create(client, messages=[{"role": "user", "content": "word " * 2000}], stream=True)
    with pytest.raises(openai.BadRequestError, match="tools is not supported"):
        _create(client, tools=[{"type": "function", "function": {"name": "click", "parameters": {}}}])
    with pytest.raises(openai.BadRequestError, match=r"n must be an integer in \[1, 16\], got 17"):
        _create(client, n=17)
    assert _create(client, temperature=0).choices[0].message.content  # still serving
