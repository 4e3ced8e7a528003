"""`verl-cua serve` for real: a tiny Qwen-VL behind HTTP on loopback, answered by the hf rollout's generation; the
OpenAI shapes `verl-cua eval` reads, seeded sampling, and errors that leave the server serving."""

import base64
import http.client
import io
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from PIL import Image


def _post(url: str, body, path: str = "/chat/completions") -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _get(url: str, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url + path, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _screenshot() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (160, 210), (255, 255, 255)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _chat(seed=None, **extra) -> dict:
    content = [
        {"type": "image_url", "image_url": {"url": _screenshot()}},
        {"type": "text", "text": "Click the button."},
    ]
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 12, **extra}
    return body if seed is None else {**body, "seed": seed}


def test_it_listens_on_loopback_and_lists_its_model(server):
    assert server.startswith("http://127.0.0.1:")
    assert _get(server, "/models") == (200, {"object": "list", "data": [{"id": "tiny", "object": "model",
                                                                          "owned_by": "verl-cua"}]})  # fmt: skip


def test_a_chat_completion_with_a_screenshot(server):
    status, body = _post(server, _chat(seed=7))
    assert status == 200 and body["object"] == "chat.completion" and body["model"] == "tiny"
    (choice,) = body["choices"]
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert (
        usage["completion_tokens"] <= 12
        and usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    )
    assert usage["prompt_tokens"] > 20  # the screenshot's image tokens are in the prompt
    # the same seed gives the same text; sampling without one does not reuse it
    assert _post(server, _chat(seed=7))[1]["choices"][0]["message"]["content"] == choice["message"]["content"]
    texts = {_post(server, _chat(temperature=5.0))[1]["choices"][0]["message"]["content"] for _ in range(4)}
    assert len(texts) > 1


def test_refusals_leave_the_server_serving(server):
    assert _post(server, _chat(model="other"))[0] == 404
    status, body = _post(server, b"{not json")
    assert status == 400 and "not JSON" in body["error"]["message"]
    long_text = "word " * 2000  # past the 600-token context
    status, body = _post(server, {"messages": [{"role": "user", "content": long_text}]})
    assert status == 400 and "the context 600" in body["error"]["message"]
    remote = {
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "http://127.0.0.1:9/a.png"}]}]
    }
    assert _post(server, remote)[0] == 400
    assert _get(server, "/nope")[0] == 404
    assert _post(server, _chat(seed=1))[0] == 200  # still serving


def test_a_stream_keeps_the_connection_and_a_client_that_leaves_frees_the_server(server):
    host, port = urlsplit(server).hostname, urlsplit(server).port
    conn = http.client.HTTPConnection(host, port, timeout=120)
    headers = {"Content-Type": "application/json"}
    conn.request("POST", "/v1/chat/completions", json.dumps(_chat(seed=3, stream=True)), headers)
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    events = response.read().decode().split("\n\n")  # the chunked body, de-chunked by http.client
    assert events[-2:] == ["data: [DONE]", ""] and all(e.startswith("data: {") for e in events[:-2])
    conn.request("POST", "/v1/chat/completions", json.dumps(_chat(seed=3)), headers)  # same connection
    plain = json.loads(conn.getresponse().read())
    streamed = "".join(
        c["delta"].get("content", "") for e in events[:-2] for c in json.loads(e[len("data: ") :])["choices"]
    )
    assert plain["choices"][0]["message"]["content"] == streamed
    conn.close()
    # a client that reads one event of a long stream and leaves: its generation stops, the next request is served
    leaver = socket.create_connection((host, port), timeout=120)
    body = json.dumps(_chat(stream=True, n=16, max_tokens=500)).encode()
    leaver.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip
    received = b""
    while b"data: " not in received:  # the headers may arrive in a segment of their own
        piece = leaver.recv(4096)
        assert piece, received  # the server closed before its first event
        received += piece
    leaver.close()
    start = time.monotonic()
    assert _post(server, _chat(seed=1))[0] == 200
    assert time.monotonic() - start < 60  # 16 x 500 tokens would take minutes on the CPU


def test_serve_refuses_a_folder_without_a_model(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "verl_cua.cli", "serve", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "is not a Hugging Face model folder (no config.json)" in proc.stderr
