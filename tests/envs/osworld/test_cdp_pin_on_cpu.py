"""`cdp_pin`: the websocket URL a desktop's CDP endpoint names is accepted only on the endpoint's own host and port
with a browser path; fuzzed, and against a real HTTP endpoint on loopback answering what a hostile desktop would."""

import http.server
import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verl_cua.envs.osworld.cdp_pin import CDPRedirectRefused, pinned_ws_url

ENDPOINT = "http://127.77.0.100:40000"


@pytest.fixture
def answering():
    """A loopback CDP endpoint whose /json/version names whatever the test sets."""
    state = {"url": ""}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server naming
            body = json.dumps({"webSocketDebuggerUrl": state["url"]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()


def test_the_browsers_own_url_is_taken_and_every_other_place_refused(answering):
    endpoint, state = answering
    port = endpoint.rsplit(":", 1)[1]
    state["url"] = f"ws://127.0.0.1:{port}/devtools/browser/6f1c-a2"
    assert pinned_ws_url(endpoint) == state["url"]
    for bad in (
        f"ws://127.0.0.2:{port}/devtools/browser/x",  # another host
        f"ws://127.0.0.1:{int(port) + 1}/devtools/browser/x",  # another port
        f"ws://127.0.0.1:{port}/devtools/page/x",  # not the browser
        f"ws://127.0.0.1:{port}/devtools/browser/x/../../json",
        f"wss://127.0.0.1:{port}/devtools/browser/x",  # another scheme than the endpoint's
        f"ws://user@127.0.0.1:{port}/devtools/browser/x",
        f"ws://127.0.0.1:{port}/devtools/browser/x?a=b",
        f"ws://127.0.0.1:{port}@10.0.0.1/devtools/browser/x",
        "",
    ):
        state["url"] = bad
        with pytest.raises(CDPRedirectRefused):
            pinned_ws_url(endpoint)


@given(st.text(max_size=80), st.sampled_from(["ws", "wss", "file", "ftp", ""]), st.integers(0, 70000))
def test_no_fuzzed_websocket_url_off_the_endpoint_is_accepted(path, scheme, port):
    url = f"{scheme}://127.77.0.100:{port}/{path}"
    try:
        accepted = pinned_ws_url(url)
    except CDPRedirectRefused:
        return
    assert accepted == url and scheme in ("ws", "wss") and path.startswith("devtools/browser/") and port <= 65535


def test_an_endpoint_that_is_not_http_or_ws_is_refused():
    for endpoint in ("file:///etc/passwd", "127.77.0.100:40000", "ftp://127.77.0.100/"):
        with pytest.raises(CDPRedirectRefused, match="not a CDP endpoint"):
            pinned_ws_url(endpoint)
