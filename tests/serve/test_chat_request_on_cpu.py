"""`verl-cua serve`'s request parsing: OpenAI chat bodies become the processor's messages and decoded images; every
refusal is a `RequestError` with one line and an HTTP status, whatever the body holds (fuzzed), and nothing is
ever fetched from the network."""

import base64
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from verl_cua.serve.chat import MAX_IMAGES, RequestError, cut_at_stop, parse_request


def _png(size=(8, 6), color=(200, 10, 10)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _body(**extra):
    content = [{"type": "image_url", "image_url": {"url": _png()}}, {"type": "text", "text": "Click the button."}]
    return {"model": "m", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": content}],
            **extra}  # fmt: skip


def test_an_eval_request_becomes_messages_images_and_sampling():
    request = parse_request(_body(max_tokens=24, temperature=0.7, top_p=0.9, seed=3, stop="\n\n"), "m")
    assert request.messages == [
        {"role": "system", "content": [{"type": "text", "text": "sys"}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the button."}]},
    ]
    assert [im.size for im in request.images] == [(8, 6)] and request.images[0].mode == "RGB"
    assert (request.max_tokens, request.temperature, request.top_p, request.seed, request.stop) == (
        24,
        0.7,
        0.9,
        3,
        ["\n\n"],
    )


def test_defaults_are_openai_s():
    request = parse_request({"messages": [{"role": "user", "content": "hi"}]}, "m")
    assert (request.max_tokens, request.temperature, request.top_p, request.top_k, request.seed) == (
        None,
        1.0,
        1.0,
        -1,
        None,
    )
    assert parse_request(_body(max_completion_tokens=7), "m").max_tokens == 7
    assert (request.n, request.stream, request.include_usage) == (1, False, False)


def test_stream_n_and_the_unused_values_of_unsupported_fields():
    body = _body(stream=True, stream_options={"include_usage": True}, n=16)
    request = parse_request(body, "m")
    assert (request.n, request.stream, request.include_usage) == (16, True, True)
    unused = {"logprobs": False, "top_logprobs": 0, "response_format": {"type": "text"}, "tools": [], "logit_bias": {},
              "presence_penalty": 0.0}  # fmt: skip
    assert parse_request(_body(**unused), "m").n == 1  # what a client sends for "not used" passes


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (_body(model="other"), 404, "does not exist; this server serves 'm'"),
        (_body(n=0), 400, "n must be an integer in [1, 16], got 0"),
        (_body(n=2.0), 400, "n must be an integer"),
        (_body(stream="yes"), 400, "stream must be true or false"),
        (_body(stream_options={"include_usage": True}), 400, "stream_options must be an object and needs stream"),
        (_body(logprobs=True), 400, "logprobs is not supported by verl-cua serve"),
        (_body(response_format={"type": "json_object"}), 400, "response_format is not supported"),
        (_body(frequency_penalty=0.5), 400, "frequency_penalty is not supported"),
        (_body(logprobs=0), 400, "logprobs is not supported"),
        ({"model": "m", "messages": []}, 400, "messages must be a non-empty list"),
        ([1, 2], 400, "must be a JSON object"),
        (_body(temperature=-1), 400, "temperature must be a number in [0, 100]"),
        (_body(temperature=True), 400, "temperature must be a number"),
        (_body(max_tokens=0), 400, "max_tokens must be a positive integer"),
        (_body(stop=[""]), 400, "stop must be a string or a list of non-empty strings"),
        ({"messages": [{"role": "hacker", "content": "x"}]}, 400, "role in system, user, assistant, tool"),
        ({"messages": [{"role": "user", "content": [{"type": "audio"}]}]}, 400, "text or image_url part"),
    ],
)
def test_bad_requests_are_refused_in_one_line(body, status, says):
    with pytest.raises(RequestError) as caught:
        parse_request(body, "m")
    assert caught.value.status == status and says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:1/x.png", "https://example.invalid/a.png", "file:///etc/passwd", "data:text/plain;base64,aGk="],
)
def test_only_data_image_urls_are_accepted_nothing_is_fetched(url):
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]}
    with pytest.raises(RequestError, match="only data:image/...;base64 URLs are accepted"):
        parse_request(body, "m")


def test_broken_and_too_many_images_are_refused():
    broken = {
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "data:image/png;base64,!!"}]}]
    }
    with pytest.raises(RequestError, match="does not decode"):
        parse_request(broken, "m")
    not_png = "data:image/png;base64," + base64.b64encode(b"not an image").decode()
    with pytest.raises(RequestError, match="does not decode"):
        parse_request({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": not_png}]}]}, "m")
    many = [{"type": "image_url", "image_url": _png()}] * (MAX_IMAGES + 1)
    with pytest.raises(RequestError, match=f"at most {MAX_IMAGES} images"):
        parse_request({"messages": [{"role": "user", "content": many}]}, "m")


def test_stop_strings_cut_the_text_as_openai_does():
    assert cut_at_stop("click(1, 2)\nDONE", ["\nDONE", ")"]) == ("click(1, 2", True)
    assert cut_at_stop("abc", ["x"]) == ("abc", False)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "x"]), "content": _json | st.text(max_size=30)}
    ),
    max_size=4,
)


_fields = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "stop", "n", "seed", "model",
           "stream", "stream_options", "logprobs", "tools")  # fmt: skip
_bodies = st.one_of(_json, st.fixed_dictionaries({"messages": _messages}, optional=dict.fromkeys(_fields, _json)))


@given(body=_bodies)
def test_any_json_body_is_parsed_or_refused_with_a_request_error(body):
    try:
        request = parse_request(body, "m")
    except RequestError as exc:
        assert exc.status in (400, 404) and "\n" not in str(exc)
    else:
        assert request.messages and all(m["role"] in ("user", "assistant", "system") for m in request.messages)
