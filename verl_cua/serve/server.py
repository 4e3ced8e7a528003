"""`verl-cua serve MODEL_DIR`: a checkpoint behind OpenAI's `/v1/chat/completions` on this machine's CPU, so `verl-cua
eval` can score it without vLLM. Generation is the `hf` rollout's (`Generator`): the same banned ids, stop ids and
sampling as training. One request runs at a time; for throughput, serve with vLLM (`vllm serve MODEL_DIR`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from verl_cua.serve.chat import ChatRequest, RequestError, cut_at_stop, parse_request

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 << 20  # a request with a few screenshots is a few MB


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
        self._lock = threading.Lock()

    def prompt_ids(self, request: ChatRequest) -> list[int]:
        """The chat template applied to the messages, images expanded into their placeholder tokens."""
        text = self.processor.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
        if not request.images:
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.processor(text=[text], images=request.images, return_tensors="pt")["input_ids"][0].tolist()

    def complete(self, request: ChatRequest) -> dict[str, Any]:
        """One chat completion in OpenAI's response format."""
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
        with self._lock:
            out, _ = self.generator.generate(ids, sampling, request.images or None)
        finish = "stop" if out and out[-1] in self.stop_ids else "length"
        text, cut = cut_at_stop(self.tokenizer.decode(out, skip_special_tokens=True), request.stop)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop" if cut else finish,
                }
            ],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out), "total_tokens": len(ids) + len(out)},
        }


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
                    raise RequestError(f"the body is {length} bytes, over the {MAX_BODY_BYTES} limit", status=413)
                try:
                    body = json.loads(self.rfile.read(length) or b"null")
                except ValueError as exc:
                    raise RequestError(f"the body is not JSON ({exc})") from None
                self._send(200, model.complete(parse_request(body, model.name)))
            except RequestError as exc:
                self._send(exc.status, _error(str(exc)))
            except Exception as exc:  # a failed generation answers 500 and the server keeps serving
                logger.exception("verl-cua serve: request failed")
                self._send(500, _error(f"{type(exc).__name__}: {exc}", kind="server_error"))

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
