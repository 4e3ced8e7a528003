"""OpenAI chat-completion requests as a Qwen-VL prompt: messages with `image_url` data parts become the processor's
chat format plus the decoded images, sampling fields become a `Sampling`, `n` and `stream` say how many choices and
how they travel. Every refusal is a `RequestError` whose one-line message names what was wrong; a field the server
would otherwise ignore with a changed meaning (`UNSUPPORTED`) is refused, not dropped; nothing is fetched from the
network (data URLs only)."""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError

ROLES = ("system", "user", "assistant", "tool")
MAX_IMAGES = 64  # per request: more is a mistake (or an attack), not a screenshot history
MAX_N = 16  # choices per request, sampled one after another: a GRPO-sized group, not a way to hold the server
# OpenAI fields this server does not implement, each with the values that mean "not used" (sent as one of those, or
# left out, they pass): ignoring any other value would answer a different question than the one asked
UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "tools": ([], None),
    "functions": ([], None),
    "response_format": ({"type": "text"}, None),
    "logprobs": (False, None),
    "top_logprobs": (0, None),
    "logit_bias": ({}, None),
    "presence_penalty": (0, None),
    "frequency_penalty": (0, None),
}


class RequestError(ValueError):
    """A request the server refuses (HTTP `status`, 400 unless said otherwise)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class ChatRequest:
    """What `generate` needs from one request: the processor-format messages, their images, decoding settings."""

    messages: list[dict[str, Any]]
    images: list[Image.Image]
    max_tokens: int | None
    temperature: float
    top_p: float
    top_k: int
    seed: int | None
    stop: list[str]
    n: int = 1
    stream: bool = False
    include_usage: bool = False  # streamed: a last chunk with the usage (`stream_options.include_usage`)


def parse_request(body: Any, served_model: str) -> ChatRequest:
    """Check an OpenAI `/v1/chat/completions` body and convert it; raises `RequestError` with one line."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served_model:
        raise RequestError(f"the model {model!r} does not exist; this server serves {served_model!r}", status=404)
    n = body.get("n", 1)
    if n is None:
        n = 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
        raise RequestError(f"n must be an integer in [1, {MAX_N}], got {n!r}")
    for key, unused in UNSUPPORTED.items():
        if not any(_same(body.get(key), value) for value in unused):
            raise RequestError(f"{key} is not supported by verl-cua serve (docs/evaluation.md); leave it out")
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        raise RequestError(f"stream must be true or false, got {stream!r}")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream):
        raise RequestError("stream_options must be an object and needs stream: true")
    include_usage = (options or {}).get("include_usage", False)
    if not isinstance(include_usage, bool | None):
        raise RequestError(f"stream_options.include_usage must be true or false, got {include_usage!r}")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise RequestError("messages must be a non-empty list")
    images: list[Image.Image] = []
    messages = [_message(m, i, images) for i, m in enumerate(raw)]
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise RequestError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise RequestError("stop must be a string or a list of non-empty strings")
    return ChatRequest(
        messages=messages,
        images=images,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 1.0, 0.0, 100.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0),
        top_k=int(_number(body, "top_k", -1, -1, 1e9)),
        seed=None if body.get("seed") is None else int(_number(body, "seed", 0, -(2**63), 2**63 - 1)),
        stop=stop,
        n=n,
        stream=bool(stream),
        include_usage=bool(include_usage),
    )


def _same(value: Any, unused: Any) -> bool:
    """Whether a field's value is its "not used" value (a bool never stands for a number here, nor 0 for false)."""
    return value == unused and isinstance(value, bool) == isinstance(unused, bool)


def _number(body: dict, key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise RequestError(f"{key} must be a number in [{low:g}, {high:g}], got {value!r}")
    return value


def _message(message: Any, index: int, images: list[Image.Image]) -> dict[str, Any]:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise RequestError(f"messages[{index}] must be an object with a role in {', '.join(ROLES)}")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return {"role": message["role"], "content": [{"type": "text", "text": content or ""}]}
    if not isinstance(content, list):
        raise RequestError(f"messages[{index}].content must be a string or a list of parts")
    parts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            images.append(_data_image(url, f"messages[{index}].content[{j}]"))
            parts.append({"type": "image"})
        else:
            raise RequestError(f"messages[{index}].content[{j}] must be a text or image_url part, got type {kind!r}")
    if len(images) > MAX_IMAGES:
        raise RequestError(f"at most {MAX_IMAGES} images per request")
    return {"role": message["role"], "content": parts}


def _data_image(url: Any, where: str) -> Image.Image:
    """An RGB image from a `data:image/...;base64,` URL; any other URL is refused (the server fetches nothing)."""
    if not isinstance(url, str) or not url.startswith("data:image/") or ";base64," not in url:
        shown = url[:40] if isinstance(url, str) else type(url).__name__
        raise RequestError(f"{where}: only data:image/...;base64 URLs are accepted, got {shown!r}")
    try:
        data = base64.b64decode(url.split(";base64,", 1)[1], validate=True)
        image = Image.open(io.BytesIO(data))
        image.load()
    except (binascii.Error, UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise RequestError(f"{where}: the image does not decode ({type(exc).__name__})") from None
    return image.convert("RGB")


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """`text` up to the first of the `stop` strings (excluded, as OpenAI does), and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)
