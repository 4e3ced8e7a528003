"""In-desktop part of the app APIs, first file: the connection to the running LibreOffice, the dispatcher and helpers.

Runs INSIDE the desktop as its user (posted to the desktop's `/run_python` by `apis.runner`), never on the host. The
runner joins this file and the per-app files (`calc_api.py`, ...) into one script whose last line is
`_verl_cua_main(json.loads(<the call as a JSON string literal>))`: the call is data; it picks a tool class and a
method by name from `TOOLS` and passes literal arguments. The files form one namespace once joined, so they import
nothing from each other; `uno` is imported lazily (this file must also parse and import on a host without it).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

RESULT_MARKER = "@@verl-cua-api-result@@"
PIPE_NAME = "verl-cua-uno"
ACCEPT = f"pipe,name={PIPE_NAME};urp;"
CONNECT_WAIT = 10.0  # seconds for a running LibreOffice to start listening after `soffice --accept`


class ApiError(Exception):
    """The agent's problem (bad cell, no document open): the message is the one-line result it reads."""


class Office:
    """The running LibreOffice, connected on first use."""

    def __init__(self):
        self._ctx = None
        self._desktop = None

    @property
    def ctx(self):
        if self._ctx is None:
            self._ctx = _connect()
        return self._ctx

    @property
    def desktop(self):
        if self._desktop is None:
            self._desktop = self.service("com.sun.star.frame.Desktop")
        return self._desktop

    def service(self, name, *args):
        smgr = self.ctx.ServiceManager
        if args:
            return smgr.createInstanceWithArgumentsAndContext(name, args, self.ctx)
        return smgr.createInstanceWithContext(name, self.ctx)

    def document(self, service, app):
        """The open document of `service` the agent sees: the current one if it is of that kind, else the first."""
        current = self.desktop.getCurrentComponent()
        if current is not None and _supports(current, service):
            return current
        components = self.desktop.getComponents().createEnumeration()
        while components.hasMoreElements():
            doc = components.nextElement()
            if _supports(doc, service):
                return doc
        raise ApiError(f"no {app} document is open")


def _supports(doc, service):
    try:
        return bool(doc.supportsService(service))
    except Exception:
        return False


def _connect():
    try:
        import uno
        from com.sun.star.connection import NoConnectException
    except ImportError:
        raise ApiError("this desktop's Python has no UNO bridge (python3-uno): app APIs are unavailable") from None
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    url = f"uno:{ACCEPT}StarOffice.ComponentContext"
    try:
        return resolver.resolve(url)
    except NoConnectException:
        pass
    if not _soffice_running():
        raise ApiError("LibreOffice is not running: open a document or an app first")
    # a second soffice hands --accept to the running instance over its IPC pipe and exits
    subprocess.run(
        ["soffice", f"--accept={ACCEPT}"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, timeout=30, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + CONNECT_WAIT
    while True:
        try:
            return resolver.resolve(url)
        except NoConnectException:
            if time.monotonic() > deadline:
                raise ApiError("LibreOffice does not accept API connections (is a dialog blocking it?)") from None
            time.sleep(0.1)


def _soffice_running():
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() in ("soffice.bin", "soffice"):
                        return True
            except OSError:
                continue
    return False


def prop(name, value):
    """A com.sun.star.beans.PropertyValue."""
    import uno

    p = uno.createUnoStruct("com.sun.star.beans.PropertyValue")
    p.Name, p.Value = name, value
    return p


def home_path(path):
    """A checked `~/...` (or home-relative) path -> its absolute path; refused outside the home folder."""
    home = os.path.realpath(os.path.expanduser("~"))
    rel = path[2:] if path.startswith("~/") else ("" if path == "~" else path)
    if path.startswith("/") or ".." in rel.replace("\\", "/").split("/"):
        raise ApiError(f"path {path!r} must be under the home folder (~/...)")
    full = os.path.normpath(os.path.join(home, rel))
    parent = os.path.realpath(os.path.dirname(full))
    if parent != home and not parent.startswith(home + os.sep):
        raise ApiError(f"path {path!r} leaves the home folder")
    if not os.path.isdir(parent):
        raise ApiError(f"folder {os.path.dirname(path) or '~'} does not exist")
    return full


def file_url(path):
    import uno

    return uno.systemPathToFileUrl(path)


def save_document(doc, filters):
    """Store the document where it is, in its own format (no Keep-format question: that is a GUI dialog)."""
    if not doc.hasLocation():
        raise ApiError("the document was never saved: use save_as(path)")
    if doc.isReadonly():
        raise ApiError("the document is read-only: use save_as(path)")
    doc.store()
    return f"saved {_display(doc.getLocation())}"


def save_document_as(doc, path, filters):
    """Store under `path` with the filter of its extension (`filters`: ext -> (filter, export-only))."""
    full = home_path(path)
    ext = os.path.splitext(full)[1].lower().lstrip(".")
    if ext not in filters:
        raise ApiError(f"cannot save as .{ext or '(none)'}; valid extensions: {', '.join(sorted(filters))}")
    name, export = filters[ext]
    args = (prop("FilterName", name), prop("Overwrite", True))
    if export:  # pdf, csv: a copy; the document stays where it was
        doc.storeToURL(file_url(full), args)
        return f"exported {_display(file_url(full))}"
    doc.storeAsURL(file_url(full), args)
    return f"saved as {_display(file_url(full))}"


def _display(url):
    import uno

    path = uno.fileUrlToSystemPath(url)
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path


def color_value(color):
    """'yellow' or '#FFFF00' -> 0xRRGGBB."""
    named = {
        "yellow": 0xFFFF00, "red": 0xFF0000, "green": 0x00FF00, "blue": 0x0000FF, "black": 0x000000,
        "white": 0xFFFFFF, "orange": 0xFFA500, "gray": 0x808080, "grey": 0x808080, "cyan": 0x00FFFF,
        "magenta": 0xFF00FF, "purple": 0x800080, "none": -1,
    }  # fmt: skip
    key = color.strip().lower()
    if key in named:
        return named[key]
    if key.startswith("#") and len(key) == 7:
        try:
            return int(key[1:], 16)
        except ValueError:
            pass
    raise ApiError(f"color {color!r} is not a name ({', '.join(named)}) or #RRGGBB")


def table_text(rows):
    """Rows of cell values as tab-separated lines."""
    return "\n".join("\t".join(_cell_text(v) for v in row) for row in rows)


def _cell_text(value):
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _verl_cua_main(call):
    """Run one call `{"tool", "name", "args", "timeout"}`; print one marked JSON line `{"ok", "result"}` and exit."""

    def finish(ok, result):
        sys.stdout.write("\n" + RESULT_MARKER + json.dumps({"ok": ok, "result": str(result)}) + "\n")
        sys.stdout.flush()
        os._exit(0)  # pyuno may crash in interpreter teardown: skip it

    timeout = float(call.get("timeout", 20))
    watchdog = threading.Timer(timeout, finish, (False, f"the API call timed out after {timeout:g} s"))
    watchdog.daemon = True
    watchdog.start()
    signal.alarm(int(timeout) + 3)  # the kernel's backstop: SIGALRM ends a call blocked with the GIL held
    try:
        tool = TOOLS.get(call["tool"])  # noqa: F821 (defined by the last joined file)
        method = vars(tool).get(call["name"]) if tool is not None else None
        if method is None or call["name"].startswith("_"):
            raise ApiError(f"unknown API {call['tool']}.{call['name']}")
        result = method.__func__(Office(), **call["args"])
        finish(True, "done" if result is None else result)
    except ApiError as exc:
        finish(False, exc)
    except Exception as exc:
        message = getattr(exc, "Message", None) or str(exc)
        finish(False, f"{type(exc).__name__}: {message}".split("\n")[0])
