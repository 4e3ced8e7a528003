"""The trainer talks only to the desktop: CDP websocket URLs pinned to the endpoint OSWorld's code asked for.

Playwright's `connect_over_cdp("http://host:port")` reads `/json/version` and connects to whatever
`webSocketDebuggerUrl` it names. That answer comes from the desktop, where the agent can run its own CDP server,
so it could send the trainer's browser client to any host, port and path. `install()` wraps Playwright's sync and
async `BrowserType.connect_over_cdp` (a `LocalDesktop` installs it when it starts): an http(s) endpoint is resolved
here, its websocket URL must be on the endpoint's own host and port with a `/devtools/browser/<id>` path, and
Playwright gets that checked ws:// URL (so it does not ask the desktop twice). Anything else is refused with
`CDPRedirectRefused` (OSWorld's getters then score 0).
"""

from __future__ import annotations

import functools
import re
import threading
from urllib.parse import urlsplit

import requests

BROWSER_PATH = re.compile(r"/devtools/browser/[0-9A-Za-z-]{1,64}")
VERSION_TIMEOUT = 10.0
_lock = threading.Lock()


class CDPRedirectRefused(RuntimeError):
    """A desktop's CDP endpoint named a websocket URL off its own host, port or browser path."""


def pinned_ws_url(endpoint: str, timeout: float = VERSION_TIMEOUT) -> str:
    """The browser websocket URL of a CDP `endpoint` (http(s) or ws(s)), refused unless it is on the endpoint's own
    host and port with a `/devtools/browser/<id>` path."""
    base = urlsplit(endpoint)
    if base.scheme in ("ws", "wss"):
        _check(base, base, endpoint)
        return endpoint
    if base.scheme not in ("http", "https") or not base.hostname:
        raise CDPRedirectRefused(f"not a CDP endpoint: {endpoint!r}")
    response = requests.get(f"{base.scheme}://{base.netloc}/json/version", timeout=timeout)
    response.raise_for_status()
    url = response.json().get("webSocketDebuggerUrl")
    if not isinstance(url, str):
        raise CDPRedirectRefused(f"{endpoint}: /json/version names no webSocketDebuggerUrl")
    _check(urlsplit(url), base, url)
    return url


def _check(ws, base, url: str) -> None:
    try:
        same_place = ws.hostname == base.hostname and ws.port == base.port
    except ValueError:  # a port that is not a number
        same_place = False
    secure = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}[base.scheme]
    if (
        ws.scheme != secure or not same_place or ws.username or ws.password or ws.query or ws.fragment
        or not BROWSER_PATH.fullmatch(ws.path)
    ):  # fmt: skip
        raise CDPRedirectRefused(
            f"the desktop's CDP endpoint {base.scheme}://{base.netloc} named {url[:200]!r}: only "
            f"{secure}://{base.netloc}/devtools/browser/<id> is accepted"
        )


def install() -> None:
    """Pin Playwright's sync and async `connect_over_cdp` (idempotent; a no-op without Playwright)."""
    try:
        from playwright.async_api import BrowserType as AsyncBrowserType
        from playwright.sync_api import BrowserType
    except ImportError:
        return
    with _lock:
        original = BrowserType.connect_over_cdp
        if not getattr(original, "__verl_cua_pinned__", False):

            @functools.wraps(original)
            def connect_over_cdp(self, endpoint_url: str, *args, **kwargs):
                return original(self, pinned_ws_url(endpoint_url), *args, **kwargs)

            connect_over_cdp.__verl_cua_pinned__ = True
            BrowserType.connect_over_cdp = connect_over_cdp
        original_async = AsyncBrowserType.connect_over_cdp
        if not getattr(original_async, "__verl_cua_pinned__", False):

            @functools.wraps(original_async)
            async def connect_over_cdp_async(self, endpoint_url: str, *args, **kwargs):
                import asyncio

                url = await asyncio.to_thread(pinned_ws_url, endpoint_url)  # the check makes a blocking request
                return await original_async(self, url, *args, **kwargs)

            connect_over_cdp_async.__verl_cua_pinned__ = True
            AsyncBrowserType.connect_over_cdp = connect_over_cdp_async
