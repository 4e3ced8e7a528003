"""A scripted chat endpoint for tests and offline demos: OpenAI's /v1/chat/completions and Anthropic's /v1/messages on
127.0.0.1, answering by task (a word of the instruction) and turn (assistant messages so far); it keeps every
request it got so tests can check what the harness sent."""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image


class Raw:
    """A script entry sent as the response body exactly as it is (any JSON value, e.g. null or a list)."""

    def __init__(self, body):
        self.body = body


class ScriptedChatServer:
    """`scripts[word] = [reply 0, reply 1, ...]`: the first script whose word is in the instruction answers. A reply
    is model text, a list of Anthropic content blocks, or a whole recorded response body (a dict, sent as it is)."""

    def __init__(self, scripts: dict[str, list], *, fallback: str = "", status: int = 200, port: int = 0):
        self.scripts = scripts
        self.fallback = fallback
        self.status = status
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                code, answer = server.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)  # port 0: any free one
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        if self.status != 200:
            return self.status, {"error": {"message": f"scripted status {self.status}"}}
        messages = body["messages"]
        turn = sum(m["role"] == "assistant" for m in messages)
        text = first_user_text(messages)
        script = next((s for word, s in self.scripts.items() if word in text), None)
        reply = script[turn] if script is not None and turn < len(script) else self.fallback
        if isinstance(reply, Raw):
            return 200, reply.body
        if isinstance(reply, dict):  # a recorded response body, replayed as it is
            return 200, reply
        if path.endswith("/messages"):
            content = reply if isinstance(reply, list) else [{"type": "text", "text": reply}]
            return 200, {
                "id": f"msg_{len(self.requests)}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn",
                "usage": {"input_tokens": 1000 + turn, "output_tokens": 30},
            }
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000 + turn, "completion_tokens": 20, "total_tokens": 1020 + turn},
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def first_user_text(messages: list[dict]) -> str:
    """The text of the first user message (the instruction), for either API's shape."""
    user = next(m for m in messages if m["role"] == "user")
    content = user["content"]
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content if p.get("type") == "text")


def request_images(body: dict) -> list[Image.Image]:
    """Every screenshot in an OpenAI or Anthropic request body, decoded."""
    found: list[Image.Image] = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "image_url":
                found.append(_decode(node["image_url"]["url"].split(",", 1)[1]))
            elif node.get("type") == "image" and isinstance(node.get("source"), dict):
                found.append(_decode(node["source"]["data"]))
            else:
                for value in node.values():
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body.get("messages", []))
    return found


def _decode(data: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    image.load()
    return image


class GatedChatServer(ScriptedChatServer):
    """Answers as scripted, but holds request number `hold` (1-based) until `release` is set: a run is then
    certainly mid-episode (`held` is set once that request arrived)."""

    def __init__(self, scripts: dict[str, list], hold: int):
        super().__init__(scripts)
        self.hold = hold
        self.held = threading.Event()
        self.release = threading.Event()

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        """The scripted answer, after `release` (at most 60 s) for the held request."""
        if len(self.requests) == self.hold:
            self.held.set()
            self.release.wait(60)
        return super().answer(path, body)
