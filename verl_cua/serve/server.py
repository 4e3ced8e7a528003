"""`verl-cua serve MODEL_DIR`: a checkpoint behind OpenAI's `/v1/chat/completions` on this machine's CPU, so `verl-cua
eval` (or any OpenAI client) can score it without vLLM. Generation is the `hf` rollout's (`Generator`): the same
banned ids, stop ids and sampling as training. `stream: true` answers with server-sent events, token by token; `n`
choices are sampled one after another. One request runs at a time; for throughput, serve with vLLM (`vllm serve
MODEL_DIR`). docs/evaluation.md lists what of OpenAI's API it serves.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from verl_cua.actions.types import one_line
from verl_cua.serve.chat import ChatRequest, RequestError, parse_request
from verl_cua.serve.stream import ChunkStream, StopGeneration, TextDeltas, event

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 << 20  # a request with a few screenshots is a few MB
SOCKET_TIMEOUT_S = 60  # per socket read or write: an idle keep-alive connection, a stream nobody reads


class ChatModel:
    """A Hugging Face checkpoint (model, processor, tokenizer) ready to answer chat requests."""

    def __init__(self, model_dir: str | Path, name: str | None = None, max_model_len: int | None = None):
        from transformers import AutoProcessor, GenerationConfig

        from verl_cua.integrations.hf_generation import Generator, load_model, max_position_embeddings

        self.name = name or str(model_dir)
        self.processor = AutoProcessor.from_pretrained(model_dir)
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        model = load_model(model_dir)
        eos = [getattr(self.tokenizer, "eos_token_id", None)]
        try:
            hub_eos = GenerationConfig.from_pretrained(model_dir).eos_token_id
        except OSError:  # no generation_config.json
            hub_eos = None
        eos += hub_eos if isinstance(hub_eos, list | tuple) else [hub_eos]
        self.stop_ids = tuple(sorted({int(i) for i in eos if i is not None}))
        pad = getattr(self.tokenizer, "pad_token_id", None)
        pad = self.stop_ids[0] if pad is None and self.stop_ids else pad
        self.generator = Generator(model, self.tokenizer, self.processor, pad_token_id=pad, name="verl-cua serve")
        context = max_position_embeddings(model.config)
        self.context = min(max_model_len or context, context)
        self.lock = threading.Lock()  # one request generates at a time

    def prompt_ids(self, request: ChatRequest) -> list[int]:
        """The chat template applied to the messages, images expanded into their placeholder tokens."""
        text = self.processor.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
        placeholders = {self.generator.image_token_id, self.generator.video_token_id} - {None}
        if not request.images:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if placeholders & set(ids):
                raise RequestError(
                    "the text holds the model's image placeholder tokens; send images as image_url parts"
                )
            return ids
        try:
            return self.processor(text=[text], images=request.images, return_tensors="pt")["input_ids"][0].tolist()
        except ValueError as exc:  # e.g. placeholder tokens in the text that no image fills
            raise RequestError(f"the messages do not make a prompt with their images: {one_line(str(exc))}") from None

    def prepare(self, request: ChatRequest) -> Prepared:
        """The prompt's ids and the decoding settings; a `RequestError` when the prompt leaves no room to answer."""
        from verl_cua.integrations.hf_generation import Sampling

        ids = self.prompt_ids(request)
        room = self.context - len(ids)
        if room < 1:
            raise RequestError(f"the prompt has {len(ids)} tokens, the context {self.context}: shorten it")
        sampling = Sampling(
            max_new_tokens=min(request.max_tokens or room, room),
            temperature=request.temperature,
            top_p=request.top_p,
            top_k=request.top_k,
            stop_ids=self.stop_ids,
            seed=request.seed,
        )
        return Prepared(request, ids, sampling)

    def choice(self, prepared: Prepared, index: int, emit: Callable[[str], None] | None = None) -> Choice:
        """Choice `index` of a request (seeded requests: seed + index), `emit` called with each piece of its text;
        the caller holds `lock`."""
        request = prepared.request
        seed = None if request.seed is None else request.seed + index
        deltas = TextDeltas(self.tokenizer, request.stop, emit)
        try:
            self.generator.generate(
                prepared.ids, replace(prepared.sampling, seed=seed), request.images or None, streamer=deltas
            )
        except StopGeneration:
            pass
        stopped = deltas.stopped or bool(deltas.ids) and deltas.ids[-1] in self.stop_ids
        return Choice(deltas.text, "stop" if stopped else "length", len(deltas.ids))

    def complete(self, request: ChatRequest) -> dict[str, Any]:
        """One chat completion in OpenAI's response format (`n` choices, one after another)."""
        prepared = self.prepare(request)
        with self.lock:
            choices = [self.choice(prepared, i) for i in range(request.n)]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": c.text}, "finish_reason": c.finish_reason}
                for i, c in enumerate(choices)
            ],
            "usage": _usage(prepared, choices),
        }

    def stream(self, prepared: Prepared, write: Callable[[bytes], None]) -> None:
        """A completion as server-sent events through `write`: per choice its role, its text as it is sampled and
        its finish reason; then the usage if asked for, and `[DONE]`."""
        request = prepared.request
        chunks = ChunkStream(write, f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), self.name, request.include_usage)
        choices = []
        with self.lock:  # one request at a time, its choices together
            for i in range(request.n):
                chunks.delta(i, {"role": "assistant", "content": ""})
                choice = self.choice(prepared, i, lambda piece, i=i: chunks.delta(i, {"content": piece}))
                chunks.delta(i, {}, choice.finish_reason)
                choices.append(choice)
        chunks.close(_usage(prepared, choices))


@dataclass(frozen=True)
class Prepared:
    """A checked request with its prompt ids and decoding settings."""

    request: ChatRequest
    ids: list[int]
    sampling: Any  # verl_cua.integrations.hf_generation.Sampling (torch-side, imported late)


@dataclass(frozen=True)
class Choice:
    """One sampled reply: its text (cut at a stop string), why it ended, and how many tokens it took."""

    text: str
    finish_reason: str  # "stop": a stop id or stop string; "length": max_tokens or the context ran out
    tokens: int


def _usage(prepared: Prepared, choices: list[Choice]) -> dict[str, int]:
    completion = sum(c.tokens for c in choices)
    prompt = len(prepared.ids)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ChatServer:
    """`model` behind HTTP on `host:port` (port 0: any free port); `url` is the OpenAI base URL."""

    def __init__(self, model: ChatModel, host: str = "127.0.0.1", port: int = 8000):
        self.model = model
        self.httpd = ThreadingHTTPServer((host, port), _handler(model))
        self.httpd.daemon_threads = True
        bound_host, bound_port = self.httpd.server_address[:2]
        self.url = f"http://{bound_host}:{bound_port}/v1"

    def serve_forever(self) -> None:
        """Answer requests until `shutdown()`."""
        self._served = True
        self.httpd.serve_forever()

    def shutdown(self) -> None:
        """Stop serving and close the socket (a server never started is only closed: waiting for it would hang)."""
        if getattr(self, "_served", False):
            self.httpd.shutdown()
        self.httpd.server_close()


def _handler(model: ChatModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = SOCKET_TIMEOUT_S  # a client that stops reading a stream cannot hold the model forever

        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path.rstrip("/") == "/v1/models":
                self._send(
                    200, {"object": "list", "data": [{"id": model.name, "object": "model", "owned_by": "verl-cua"}]}
                )
            elif self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, _error(f"no route GET {self.path}"))

        def do_POST(self):  # noqa: N802 (http.server's name)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, _error(f"no route POST {self.path}; use /v1/chat/completions"))
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    self.close_connection = True  # its body is left unread: it must not be read as a request
                    raise RequestError(f"the body is {length} bytes, over the {MAX_BODY_BYTES} limit", status=413)
                try:
                    body = json.loads(self.rfile.read(length) or b"null")
                except ValueError as exc:
                    raise RequestError(f"the body is not JSON ({exc})") from None
                request = parse_request(body, model.name)
                if request.stream:
                    self._stream(model.prepare(request))  # a refusal still answers with its status, not a stream
                else:
                    self._send(200, model.complete(request))
            except RequestError as exc:
                self._send(exc.status, _error(str(exc)))
            except Exception as exc:  # a failed generation answers 500 and the server keeps serving
                logger.exception("verl-cua serve: request failed")
                self._send(500, _error(f"{type(exc).__name__}: {exc}", kind="server_error"))

        def _stream(self, prepared: Prepared) -> None:
            """Server-sent events, chunked on HTTP/1.1 (HTTP/1.0: until the connection closes); once the headers
            are out, a failure is an error event and a broken connection ends the request, never a second status."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            if self.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.close_connection = True
            self.end_headers()
            try:
                try:
                    model.stream(prepared, self._chunk)
                except OSError:
                    raise
                except Exception as exc:  # the failure travels as an error event, as OpenAI's does
                    logger.exception("verl-cua serve: streamed request failed")
                    self._chunk(event(_error(f"{type(exc).__name__}: {exc}", kind="server_error")))
                if self.chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except OSError as exc:  # the client left or stopped reading: its generation stopped with the write
                logger.info("verl-cua serve: a streamed request ended early: %s", type(exc).__name__)
                self.close_connection = True

        @property
        def chunked(self) -> bool:
            """A stream's framing: HTTP/1.1 chunks (HTTP/1.0: none, the connection closes after it)."""
            return self.request_version != "HTTP/1.0"

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n" if self.chunked else data)

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            logger.info("%s %s", self.address_string(), format % args)

    return Handler


def _error(message: str, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind}}
