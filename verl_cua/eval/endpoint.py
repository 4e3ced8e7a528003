"""`ChatClient`: one model behind a chat API (`verl_cua.eval.apis`), with retries, backoff and error classes."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from verl_cua.actions import PromptSpec
from verl_cua.eval.apis import ModelReply, Request, Turn, get_api

logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
FATAL_STATUS = {
    401: "check the API key (--api-key-env)",
    403: "check the API key's permissions",
    404: "check --base-url and --model",
}
MAX_RETRY_AFTER = 60.0
GIVE_UP_AFTER = 8  # failed requests in a row (all workers together): the endpoint is down or rejects us, stop


class EndpointError(RuntimeError):
    """The endpoint failed; never the model's failure. `kind`: `retryable` (down, overloaded, timed out),
    `rejected` (it refused this request, e.g. too long for its context), `fatal` (bad key, URL or model, or too
    many failures in a row: the whole run stops)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class ChatClient:
    """Sends the conversation so far to `model` and returns its reply; safe to share between threads.

    After `give_up_after` failed requests in a row (no success in between, all threads together) every further
    failure is `fatal`: a down or refusing endpoint stops the run instead of burning a desktop reset per task.
    """

    def __init__(
        self,
        api: str,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 300.0,
        retries: int = 3,
        backoff: float = 2.0,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        extra_body: dict[str, Any] | None = None,
        give_up_after: int = GIVE_UP_AFTER,
    ):
        try:
            import httpx  # noqa: F401
        except ImportError:
            raise ImportError("verl-cua eval needs httpx: pip install 'verl-cua'") from None
        self.api = get_api(api)
        self.model = model
        self.url = _join(base_url or self.api.default_base_url, self.api.path)
        self._headers = {"Content-Type": "application/json", **self.api.headers(api_key)}
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.max_tokens, self.temperature = max_tokens, temperature
        self.extra_body = dict(extra_body or {})
        self._local = threading.local()
        self.give_up_after = give_up_after
        self._failures = 0
        self._lock = threading.Lock()

    def wait_until_answers(self, timeout: float, interval: float = 2.0, flag: str = "--base-url") -> None:
        """Return once the endpoint answers HTTP at all (any status); after `timeout` seconds of tries, a fatal
        `EndpointError` naming the URL (and `flag`, the option that sets it). Run before any desktop starts, so a server
        that is not up costs no reset."""
        import httpx

        deadline = time.monotonic() + timeout
        tries, error = 0, "no attempt"
        with httpx.Client(timeout=min(10.0, max(1.0, timeout))) as client:
            while True:
                tries += 1
                try:
                    client.get(self.url, headers=self._headers)
                    return
                except httpx.TransportError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                if time.monotonic() + interval > deadline:
                    break
                time.sleep(interval)
        raise EndpointError(
            f"{self.url} does not answer ({error}; {tries} tries in {timeout:g} s): start the server or fix "
            f"{flag} (--endpoint-wait S waits longer for a server still starting)",
            "fatal",
        )

    def complete(self, spec: PromptSpec, turns: list[Turn], history_images: int) -> ModelReply:
        """One model turn for the conversation `turns`; raises `EndpointError` once retries are spent."""
        request = Request(
            model=self.model,
            spec=spec,
            turns=turns,
            history_images=history_images,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            extra_body=self.extra_body,
        )
        return self._answer(self.api.body(request), request)

    def complete_messages(self, messages: Sequence[Mapping[str, Any]]) -> ModelReply:
        """One model turn for OpenAI chat `messages` sent as they are (a planner's whole context, rebuilt each step:
        `verl_cua.eval.executor.openai_message` makes them); OpenAI-compatible APIs only. Raises `EndpointError` once
        retries are spent, as `complete` does."""
        if self.api.name != "openai":
            raise ValueError(f"chat messages go to OpenAI-compatible endpoints only, not {self.api.name!r}")
        body = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            **self.extra_body,
        }
        if "max_completion_tokens" in self.extra_body:  # OpenAI's reasoning models refuse max_tokens
            del body["max_tokens"]
        return self._answer(body, None)

    def _answer(self, body: dict[str, Any], request: Request | None) -> ModelReply:
        """Post `body`, parse the reply (an unusable body is retryable), count the failures in a row."""
        try:
            data, seconds = self._post(body)
            try:
                reply = self.api.reply(data, request)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:  # a body of the wrong shape
                raise EndpointError(
                    f"{self.url}: unusable response: {type(exc).__name__}: {exc}", "retryable"
                ) from None
        except EndpointError as exc:
            raise self._failed(exc) from None
        with self._lock:
            self._failures = 0
        reply.seconds = seconds  # the answering attempt only, not the retries before it
        return reply

    def _failed(self, exc: EndpointError) -> EndpointError:
        with self._lock:
            self._failures += 1
            give_up = self._failures >= self.give_up_after
        if give_up and exc.kind != "fatal":
            return EndpointError(f"{exc} ({self._failures} failed requests in a row; giving up)", "fatal")
        return exc

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        import httpx

        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(timeout=self.timeout)
        error = "no attempt"
        for attempt in range(self.retries + 1):
            wait = min(self.backoff * 2**attempt, MAX_RETRY_AFTER)
            start = time.perf_counter()
            try:
                response = client.post(self.url, json=body, headers=self._headers)
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if status == 200:
                    try:
                        return response.json(), time.perf_counter() - start
                    except ValueError:
                        error = f"HTTP 200 with a body that is not JSON: {response.text[:120]!r}"
                elif status in FATAL_STATUS:
                    raise EndpointError(
                        f"{self.url}: HTTP {status} {_detail(response)}; {FATAL_STATUS[status]}", "fatal"
                    )
                elif status in RETRY_STATUS:
                    error = f"HTTP {status} {_detail(response)}"
                    wait = max(wait, _retry_after(response))
                else:
                    raise EndpointError(f"{self.url}: HTTP {status} {_detail(response)}", "rejected")
            if attempt < self.retries:
                logger.warning("%s: %s; retry %d/%d in %.1fs", self.url, error, attempt + 1, self.retries, wait)
                time.sleep(wait)
        raise EndpointError(f"{self.url}: {error} (after {self.retries} retries)", "retryable")


def api_key_from_env(api: str, variable: str | None) -> str | None:
    """The API key from `variable` (an error if it is named but unset) or the API's usual variable, if set."""
    if variable:
        value = os.environ.get(variable)
        if not value:
            raise ValueError(f"--api-key-env {variable}: that environment variable is not set")
        return value
    return os.environ.get(get_api(api).default_key_env) or None


def _join(base: str, path: str) -> str:
    base = base.rstrip("/")
    if path.startswith("/v1/") and base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + path


def _detail(response) -> str:
    try:
        data = response.json()
    except ValueError:
        return " ".join(response.text.split())[:200]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)[:200]
    return str(error or data.get("detail") or data.get("message") or data)[:200]


def _retry_after(response) -> float:
    try:
        return min(float(response.headers.get("retry-after", 0)), MAX_RETRY_AFTER)
    except ValueError:
        return 0.0
