"""Host side of the app APIs: `run_api(desktop, action)` runs one checked API call inside the desktop, as the desktop's
user, through OSWorld's `/run_python` route (our local desktop's server and OSWorld's in-VM server both have it).

The script it posts is the in-desktop library (`desktop/*.py`, read as text) plus one final line,
`_verl_cua_main(json.loads('<the call as JSON>'))`: the call travels as a string literal (Python's repr of a JSON
text), so no argument can add code; the library picks a registered tool class and method by name and passes the
checked literal values. Nothing here imports UNO or runs the call on the host.
"""

from __future__ import annotations

import functools
import json
import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.actions.apis import MAX_RESULT_CHARS, lookup_api
from verl_cua.actions.types import ActionError, GUIAction, one_line

logger = logging.getLogger(__name__)

LIBRARY_DIR = Path(__file__).resolve().parent / "desktop"
LIBRARY_FILES = ("uno_common.py", "calc_api.py", "writer_api.py", "impress_api.py", "agent_api.py")
RESULT_MARKER = "@@verl-cua-api-result@@"  # uno_common.RESULT_MARKER
CALL_LINE = "_verl_cua_main(json.loads({call}))\n"
DEFAULT_TIMEOUT = 20.0  # seconds one API may run inside the desktop
TRANSPORT_SLACK = 15.0  # the HTTP request waits this much longer (python start, the UNO connection)
MAX_RESULT = MAX_RESULT_CHARS  # characters of a result the agent reads
FOCUS_TIMEOUT = 5.0
FOCUS_COMMAND = 'xprop -id "$(xdotool getactivewindow)" WM_CLASS _NET_WM_NAME 2>/dev/null'
TERMINAL_CLASSES = ("xterm", "gnome-terminal", "xfce4-terminal", "mate-terminal", "konsole", "tilix", "terminator")


@dataclass(frozen=True)
class ApiOutcome:
    """What one API call did: `ok`, and the result text the agent reads (a one-line reason when not ok)."""

    ok: bool
    result: str


@functools.lru_cache(maxsize=1)
def library_source() -> str:
    """The in-desktop library: its files joined in order, one namespace."""
    return "\n\n".join((LIBRARY_DIR / name).read_text() for name in LIBRARY_FILES)


def build_script(tool: str, name: str, args: dict[str, Any], timeout: float = DEFAULT_TIMEOUT) -> str:
    """The script that runs `tool.name(**args)` in the desktop: the library, then the call as JSON data."""
    call = json.dumps({"tool": tool, "name": name, "args": args, "timeout": float(timeout)}, ensure_ascii=True)
    return library_source() + "\n\n" + CALL_LINE.format(call=repr(call))


def run_api(desktop: Any, action: GUIAction, timeout: float = DEFAULT_TIMEOUT) -> ApiOutcome:
    """Run the api action `action` on `desktop` (an OSWorld DesktopEnv, its PythonController, or anything with
    `run_python_script(script)`). A bad call (unknown API, bad argument) raises ActionError before anything is sent; a
    failing API is `ok=False` with its one-line reason; a desktop that does not answer raises (requests' errors)."""
    tool, _, name = (action.api or "").partition(".")
    args = lookup_api(tool, name).bind([], dict(action.args or {}))
    reply = _run_python(getattr(desktop, "controller", desktop), build_script(tool, name, args, timeout), timeout)
    return parse_reply(reply)


def parse_reply(reply: Any) -> ApiOutcome:
    """`/run_python`'s reply -> ApiOutcome: the script's last marked JSON line, else why it printed none."""
    reply = reply if isinstance(reply, dict) else {}
    output = reply.get("output") or ""
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                data = json.loads(line[len(RESULT_MARKER) :])
                ok, result = bool(data["ok"]), str(data["result"])
            except (ValueError, KeyError, TypeError):
                break
            return ApiOutcome(ok, cap(result) if ok else one_line(result, MAX_RESULT))
    if reply.get("returncode") == -signal.SIGALRM:
        return ApiOutcome(False, "the API call timed out (stopped by its time limit)")
    error = (reply.get("error") or reply.get("message") or "no output").strip().splitlines()
    logger.warning("an API script printed no result: %s", " | ".join(error[-3:]))
    return ApiOutcome(False, one_line(f"the API did not run: {error[-1] if error else 'no output'}", 300))


def cap(text: str, limit: int = MAX_RESULT) -> str:
    """`text` cut to `limit` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    note = f"... [{len(text)} characters in all]"
    return text[: limit - len(note)] + note


def _run_python(controller: Any, script: str, timeout: float) -> dict:
    """POST the script to the desktop's `/run_python` (no retry: an API may not be idempotent)."""
    server = getattr(controller, "http_server", None)
    if server is None:
        return controller.run_python_script(script)
    import requests

    response = requests.post(server + "/run_python", json={"code": script}, timeout=timeout + TRANSPORT_SLACK)
    try:
        reply = response.json()
    except ValueError:
        reply = {"error": f"HTTP {response.status_code} from the desktop's /run_python"}
    return reply if isinstance(reply, dict) else {}


def focused_app(desktop: Any) -> str | None:
    """The OSWorld app key of the active window (libreoffice_calc, libreoffice_writer, libreoffice_impress, chrome,
    vlc, gimp, terminal), None for another window or none; one request, and None when the desktop does not answer."""
    controller = getattr(desktop, "controller", desktop)
    server = getattr(controller, "http_server", None)
    if server is None:
        return None
    import requests

    try:
        response = requests.post(
            server + "/execute", json={"command": FOCUS_COMMAND, "shell": True}, timeout=FOCUS_TIMEOUT
        )
        output = response.json().get("output") or ""
    except Exception:
        return None
    wm_class = title = ""
    for line in output.splitlines():
        if line.startswith("WM_CLASS"):
            wm_class = line.partition("=")[2]
        elif line.startswith("_NET_WM_NAME"):
            title = line.partition("=")[2]
    return classify_window(wm_class, title)


def classify_window(wm_class: str, title: str) -> str | None:
    """An app key from a window's WM_CLASS text and title."""
    wm_class, title = wm_class.lower(), title.strip().strip('"').lower()
    for app in ("calc", "writer", "impress"):
        if f"libreoffice-{app}" in wm_class or title.endswith(f"libreoffice {app}"):
            return f"libreoffice_{app}"
    for needle, app in (("chrom", "chrome"), ("vlc", "vlc"), ("gimp", "gimp")):
        if needle in wm_class:
            return app
    if any(f'"{name}"' in wm_class for name in TERMINAL_CLASSES):
        return "terminal"
    return None


__all__ = ["ActionError", "ApiOutcome", "build_script", "classify_window", "focused_app", "library_source", "run_api"]
