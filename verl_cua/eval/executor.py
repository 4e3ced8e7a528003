"""The executor of a planner/executor agent (CODA): a frozen grounding model that turns the planner's thought and the
screenshots into one action, as a setting (`ExecutorSettings`), a `kind` registry and the OpenAI-compatible client.

An executor that is down, slow, refusing or answering garbage raises `ExecutorUnavailable`: infra, never the
planner's failure. Its `kind` says which (`retryable`: down or overloaded after the retries; `rejected`: it refused
this request, a 4xx; `fatal`: bad key, URL or model), with the words of `EndpointError`.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

from PIL import Image

from verl_cua.actions import get_format
from verl_cua.eval.apis import get_api, png_bytes
from verl_cua.eval.apis.openai_chat import _content_text
from verl_cua.eval.endpoint import FATAL_STATUS, MAX_RETRY_AFTER, RETRY_STATUS, _detail, _join, _retry_after
from verl_cua.registry import Registry, resolve

logger = logging.getLogger(__name__)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PART_TYPES = ("text", "image", "image_url")  # the content parts a message may hold


@dataclass(frozen=True)
class ExecutorSettings:
    """Where the executor runs and how it is asked (`cua.executor.*`)."""

    # which implementation: `openai` (any OpenAI-compatible chat endpoint, e.g. vLLM serving UI-TARS-1.5-7B) or
    # `standin_grounding` (a scripted stand-in for CPU tests, no model); `EXECUTORS` lists them
    kind: str = "openai"
    # the endpoint's base URL; requests go to {base_url}/chat/completions
    base_url: str = "http://localhost:8000/v1"
    # the model name the server serves (vLLM's --served-model-name)
    model: str = "ByteDance-Seed/UI-TARS-1.5-7B"
    # sampling temperature; 0 makes the grounding deterministic
    temperature: float = 0.0
    # the most tokens of one reply (one UI-TARS action needs well under 100)
    max_tokens: int = 256
    # seconds one attempt may wait for the server (connect, then each read) before it counts as a timeout
    timeout_s: float = 60.0
    # further attempts after a timeout, a refused connection or a retryable status (429, 5xx, ...)
    retries: int = 3
    # seconds before the first retry, doubled per retry (a server's Retry-After, up to 60 s, wins when longer)
    backoff_s: float = 2.0
    # the environment variable holding the API key (sent as a Bearer token); None: no key (a local vLLM)
    api_key_env: str | None = None
    # the action format the executor's reply is parsed with (`parse_action(format=...)`)
    format: str = "uitars"
    # extra fields of the request body, e.g. vLLM's {continue_final_message: true, add_generation_prompt: false} to
    # continue the final assistant message instead of opening a new turn
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.kind, str) or not self.kind:
            problems.append(f"kind must be a non-empty string, got {self.kind!r}")
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            problems.append(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.timeout_s > 0:
            problems.append(f"timeout_s must be > 0, got {self.timeout_s!r}")
        if not isinstance(self.retries, int) or self.retries < 0:
            problems.append(f"retries must be an integer >= 0, got {self.retries!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            problems.append(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if not self.backoff_s >= 0 or not self.temperature >= 0:
            problems.append(f"backoff_s and temperature must be >= 0, got {self.backoff_s!r}, {self.temperature!r}")
        if problems:
            raise ValueError(f"executor settings: {'; '.join(problems)}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ExecutorSettings:
        """Settings from a config mapping (`cua.executor`); an unknown key is one line naming the valid ones."""
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(valid))
        if unknown:
            raise ValueError(f"unknown executor setting(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
        return cls(**dict(values))


@dataclass
class ExecutorReply:
    """One executor answer. `text`: what the format parses (the final assistant message's text put before a reply
    that continued it, so `Action:` is always there); `raw`: the model's own text; `seconds`: the whole call,
    retries and backoff included; `attempts`: requests sent."""

    text: str
    seconds: float
    attempts: int
    raw: str = ""


class ExecutorUnavailable(RuntimeError):
    """The executor is down, slow, refusing or answered nothing usable: infra, never the planner's failure."""

    def __init__(self, url: str, model: str, attempts: int, cause: str, kind: str = "retryable", status: int = 0):
        cause = " ".join(str(cause).split())
        super().__init__(f"executor {model!r} at {url} unavailable after {attempts} attempt(s): {cause}")
        self.url, self.model, self.attempts, self.cause = url, model, attempts, cause
        self.kind = kind  # retryable | rejected | fatal, as EndpointError
        self.status = status  # the last HTTP status, 0 when none came back

    def __reduce__(self):  # picklable across processes (Ray workers) despite the keyword-rich __init__
        return type(self), (self.url, self.model, self.attempts, self.cause, self.kind, self.status)


class ExecutorStats:
    """Counts over an executor's life, shared by every thread that calls it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0  # act() calls
        self.failures = 0  # calls that raised
        self.retries = 0  # requests beyond each call's first
        self.seconds = 0.0  # wall time inside act(), failures included

    def record(self, seconds: float, attempts: int, failed: bool) -> None:
        """Count one finished call."""
        with self._lock:
            self.calls += 1
            self.failures += int(failed)
            self.retries += max(0, attempts - 1)
            self.seconds += seconds

    def snapshot(self) -> dict[str, float]:
        """The counts now, as one consistent dict."""
        with self._lock:
            return {"calls": self.calls, "failures": self.failures, "retries": self.retries, "seconds": self.seconds}


@runtime_checkable
class Executor(Protocol):
    """Turns `messages` (chat-template content parts ending in the assistant's `"{thought}\\nAction: "`) into one
    action text in `settings.format`; `observation` is what the env returned, for executors that read it."""

    settings: ExecutorSettings
    stats: ExecutorStats

    def act(self, messages: Sequence[Mapping[str, Any]], observation: Any = None) -> ExecutorReply:
        """One action; raises ExecutorUnavailable when the executor cannot answer."""
        ...

    async def act_async(self, messages: Sequence[Mapping[str, Any]], observation: Any = None) -> ExecutorReply:
        """`act` without blocking the event loop."""
        ...

    def close(self) -> None:
        """Release connections; the executor may not be used after."""
        ...


# ---------------------------------------------------------------- registry

EXECUTORS: Registry[Callable[..., Executor] | str] = Registry("executor kind", "executor kinds")


def register_executor(kind: str) -> Callable[[type], type]:
    """Class decorator: register an executor class (built as `cls(settings, **kwargs)`) as `kind`."""

    def decorator(cls: type) -> type:
        EXECUTORS.add(kind, cls)
        return cls

    return decorator


def make_executor(settings: ExecutorSettings, **kwargs: Any) -> Executor:
    """The executor of `settings.kind`; an unknown kind or format is one ValueError line naming the valid ones."""
    factory = resolve(EXECUTORS.lookup(settings.kind))
    get_format(settings.format)
    return factory(settings, **kwargs)


# ---------------------------------------------------------------- the OpenAI-compatible executor


@register_executor("openai")
class OpenAIExecutor:
    """`POST {base_url}/chat/completions`, retried on timeouts, refused connections and `RETRY_STATUS` with
    exponential backoff; any other status fails at once. Safe to share between threads (one connection each)."""

    def __init__(self, settings: ExecutorSettings):
        try:
            import httpx  # noqa: F401
        except ImportError:
            raise ImportError("verl-cua eval needs httpx: pip install 'verl-cua'") from None
        self.settings = settings
        self.stats = ExecutorStats()
        api = get_api("openai")
        self.url = _join(settings.base_url, api.path)
        self._headers = {"Content-Type": "application/json", **api.headers(_api_key(settings.api_key_env))}
        self._format = get_format(settings.format)
        self._local = threading.local()
        self._clients: list[Any] = []
        self._lock = threading.Lock()

    def body(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The request body: the messages as OpenAI content parts and the settings' sampling fields."""
        s = self.settings
        return {
            "model": s.model,
            "messages": [openai_message(m) for m in messages],
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            **s.extra_body,
        }

    def act(self, messages: Sequence[Mapping[str, Any]], observation: Any = None) -> ExecutorReply:
        """One action for `messages` (`observation` is not read); ExecutorUnavailable once the retries are spent."""
        start = time.perf_counter()
        try:
            raw, attempts = self._post(self.body(messages))
        except ExecutorUnavailable as exc:
            self.stats.record(time.perf_counter() - start, exc.attempts, failed=True)
            raise
        seconds = time.perf_counter() - start
        self.stats.record(seconds, attempts, failed=False)
        return ExecutorReply(action_text(messages, raw, self._format), seconds, attempts, raw)

    async def act_async(self, messages: Sequence[Mapping[str, Any]], observation: Any = None) -> ExecutorReply:
        """`act` in a worker thread."""
        return await asyncio.to_thread(self.act, messages, observation)

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def _client(self) -> Any:
        import httpx

        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(timeout=self.settings.timeout_s)
            with self._lock:
                self._clients.append(client)
        return client

    def _post(self, body: dict[str, Any]) -> tuple[str, int]:
        """The reply text and the attempts it took."""
        import httpx

        s, client = self.settings, self._client()
        cause, status = "no attempt", 0
        for attempt in range(s.retries + 1):
            wait = min(s.backoff_s * 2**attempt, MAX_RETRY_AFTER)
            try:
                response = client.post(self.url, json=body, headers=self._headers)
            except httpx.TimeoutException as exc:
                cause, status = f"timed out after {s.timeout_s:g} s ({type(exc).__name__})", 0
            except httpx.TransportError as exc:
                cause, status = f"{type(exc).__name__}: {exc}", 0
            else:
                status = response.status_code
                if status == 200:
                    try:
                        return reply_text(response.json()), attempt + 1
                    except ValueError as exc:  # not JSON, or JSON of the wrong shape
                        cause = f"unusable response: {exc}"
                elif status in RETRY_STATUS:
                    cause = f"HTTP {status} {_detail(response)}"
                    wait = max(wait, _retry_after(response))
                else:
                    fatal = status in FATAL_STATUS
                    hint = "; check the executor's base_url, model and api_key_env" if fatal else ""
                    kind = "fatal" if fatal else "rejected"
                    cause = f"HTTP {status} {_detail(response)}{hint}"
                    raise ExecutorUnavailable(self.url, s.model, attempt + 1, cause, kind, status)
            if attempt < s.retries:
                logger.warning("executor %s: %s; retry %d/%d in %.1fs", self.url, cause, attempt + 1, s.retries, wait)
                time.sleep(wait)
        raise ExecutorUnavailable(self.url, s.model, s.retries + 1, cause, "retryable", status)


# ---------------------------------------------------------------- messages and replies


def openai_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat-template message as OpenAI wants it: images as PNG data-URL `image_url` parts, an assistant message of
    text parts only as one string."""
    role, content = message["role"], message.get("content")
    if content is None or isinstance(content, str):
        return {"role": role, "content": content or ""}
    parts = [_openai_part(part, role) for part in content]
    if role == "assistant" and all(p["type"] == "text" for p in parts):
        return {"role": role, "content": "".join(p["text"] for p in parts)}
    return {"role": role, "content": parts}


def _openai_part(part: Any, role: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "image":
        return {"type": "image_url", "image_url": {"url": image_data_url(part.get("image"))}}
    if kind == "image_url":
        return dict(part)
    raise ValueError(f"a {role} message has a content part of type {kind!r}; valid types: {', '.join(PART_TYPES)}")


def image_data_url(image: Any) -> str:
    """A PIL image, PNG (or other image) bytes, or a data URL as a `data:image/png;base64,...` URL."""
    if isinstance(image, str) and image.startswith("data:"):
        return image
    if isinstance(image, (bytes, bytearray)):
        data = bytes(image)
        if not data.startswith(PNG_MAGIC):
            data = png_bytes(Image.open(io.BytesIO(data)))
    elif isinstance(image, Image.Image):
        data = png_bytes(image)
    else:
        raise ValueError(f"an image part must hold a PIL image, image bytes or a data URL, got {type(image).__name__}")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def reply_text(body: Any) -> str:
    """The first choice's message text of a chat-completions body; ValueError (one line) for any other shape."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError(f"no choices in the response ({type(body).__name__}: {str(body)[:80]!r})")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ValueError("no choices[0].message in the response")
    return _content_text(message.get("content"))


def message_text(message: Mapping[str, Any]) -> str:
    """The text parts of one chat-template message, joined."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")


def action_text(messages: Sequence[Mapping[str, Any]], raw: str, fmt: Any) -> str:
    """What the format parses: `raw` when it holds an action the format detects, else the final assistant message
    (the planner's `"{thought}\\nAction: "`) followed by `raw` (a server that continued that message)."""
    if fmt.detect(raw) or not messages or messages[-1].get("role") != "assistant":
        return raw
    return message_text(messages[-1]) + raw.lstrip()


def _api_key(variable: str | None) -> str | None:
    if not variable:
        return None
    value = os.environ.get(variable)
    if not value:
        raise ValueError(f"executor api_key_env {variable}: that environment variable is not set")
    return value


EXECUTORS.add("standin_grounding", "verl_cua.testing.grounding_standin:GroundingStandIn")  # lazy: imported when made
EXECUTORS.mark_built_in()
