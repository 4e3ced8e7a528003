"""Text as it is sampled, for `verl-cua serve`: a transformers streamer that turns each new token into the text it
adds, holds back what may still change (a partial UTF-8 character, the start of a stop string) and ends the
generation at a stop string; and OpenAI's server-sent-event framing of chat-completion chunks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from verl_cua.serve.chat import cut_at_stop

DONE = b"data: [DONE]\n\n"  # the event that ends an OpenAI stream


class StopGeneration(Exception):
    """Raised from inside `generate` to end it early: a stop string was sampled."""


class TextDeltas:
    """A transformers streamer (`put`/`end`): calls `emit` with each piece of new text; `text` is the whole reply."""

    def __init__(self, tokenizer: Any, stop: list[str], emit: Callable[[str], None] | None = None):
        self.tokenizer = tokenizer
        self.stop = stop
        self.emit = emit
        self.ids: list[int] = []
        self.sent = ""  # the text emitted so far
        self.stopped = False  # a stop string ended the generation
        self._prompt = True  # `generate` puts the prompt first

    def put(self, value: Any) -> None:
        """Take the prompt (skipped) or the next sampled token ids (a tensor)."""
        if self._prompt:
            self._prompt = False
            return
        self.ids.extend(int(i) for i in value.reshape(-1).tolist())
        text, found = cut_at_stop(self._decoded(), self.stop)
        if found:
            self.stopped = True
            self._send(text)
            raise StopGeneration
        self._send(text[: len(text) - _held_back(text, self.stop)])

    def end(self) -> None:
        """The generation ended (a stop id or the token budget): send what was held back."""
        self._send(self.text)

    @property
    def text(self) -> str:
        """The reply so far, cut at the first stop string."""
        return cut_at_stop(self._decoded(), self.stop)[0]

    def _decoded(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)

    def _send(self, text: str) -> None:
        # a decode that rewrote text already sent cannot be taken back: wait for it to extend what was sent again
        if len(text) > len(self.sent) and text.startswith(self.sent):
            piece, self.sent = text[len(self.sent) :], text
            if self.emit is not None:
                self.emit(piece)


def _held_back(text: str, stop: list[str]) -> int:
    """How many trailing characters of `text` to hold: a partial UTF-8 character and, before it, the start of a stop
    string."""
    whole = text.rstrip("\ufffd")
    prefix = 0
    for s in stop:
        for size in range(min(len(s) - 1, len(whole)), prefix, -1):
            if whole.endswith(s[:size]):
                prefix = size
                break
    return len(text) - len(whole) + prefix


def event(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying `payload` as JSON."""
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class ChunkStream:
    """The chunks of one streamed completion, written as events with `write`: every chunk carries the stream's id,
    time and model; with `include_usage`, a `usage` field too (null on every chunk but the last, OpenAI's shape)."""

    def __init__(self, write: Callable[[bytes], None], completion_id: str, created: int, model: str,
                 include_usage: bool):  # fmt: skip
        self.write = write
        self.head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
        self.include_usage = include_usage

    def delta(self, index: int, delta: dict[str, str], finish_reason: str | None = None) -> None:
        """A chunk with one choice's `delta` (its role, a piece of its content, or nothing beside a finish reason)."""
        self._send([{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}])

    def close(self, usage: dict[str, int]) -> None:
        """The usage chunk (if asked for) and `[DONE]`."""
        if self.include_usage:
            self._send([], usage)
        self.write(DONE)

    def _send(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> None:
        payload = {**self.head, "choices": choices}
        if self.include_usage:
            payload["usage"] = usage
        self.write(event(payload))
