"""AT-SPI reads for the local desktop server: the accessibility tree as XML and the text of a terminal.

Runs inside the desktop (Debian python3 with python3-pyatspi), next to desktop_server.py. The XML uses the
namespace URIs OSWorld's agents expect for Ubuntu trees (state, component, attributes, value), so their
tree linearisers read it unchanged. Both walks stop at a deadline (a hung app must not hang the server).
"""

from __future__ import annotations

import time
from xml.etree import ElementTree as ET

NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
}
MAX_DEPTH = 50
MAX_NODES = 20000
MAX_CHILDREN = 500
DEFAULT_SECONDS = 20.0


BROWSER_NAMES = ("Chromium", "chromium", "Chromium-browser")


def state_name(state) -> str:
    """An AT-SPI state as OSWorld's trees name it: `ATSPI_STATE_MULTI_LINE` -> `multi_line` (a valid XML name)."""
    nick = getattr(state, "value_nick", None)  # PyGObject enums; str() of them is "<enum ATSPI_STATE_... of type ...>"
    if not nick:
        text = str(state)
        nick = text.split("STATE_", 1)[-1].split()[0].rstrip(">") if "STATE_" in text else text
    return nick.replace("-", "_").lower()


def _pyatspi():
    try:
        import pyatspi
    except ImportError:
        raise RuntimeError(
            "the accessibility tree needs AT-SPI: apt-get install -y python3-pyatspi at-spi2-core"
        ) from None
    return pyatspi


def _tag(role: str) -> str:
    tag = role.replace(" ", "-") or "unknown"
    return tag if tag[0].isalpha() else f"x-{tag}"


def _node(acc, depth: int, budget: list[int], deadline: float) -> ET.Element | None:
    if budget[0] <= 0 or depth > MAX_DEPTH or time.monotonic() > deadline:
        return None
    budget[0] -= 1
    try:
        role = acc.getRoleName()
        name = acc.name or ""
        if role == "application" and name in BROWSER_NAMES:
            name = "Google Chrome"  # our Chromium stands in for Chrome: OSWorld's getters select it by this name
        el = ET.Element(_tag(role), {"name": name})
        for state in acc.getState().getStates():
            el.set(f"{{{NS['st']}}}{state_name(state)}", "true")
        try:
            for pair in acc.getAttributes():
                key, _, value = pair.partition(":")
                if key.replace("-", "").replace("_", "").isalnum():
                    el.set(f"{{{NS['attr']}}}{key}", value)
        except Exception:
            pass
        try:
            comp = acc.queryComponent()
            x, y = comp.getPosition(0)
            w, h = comp.getSize()
            el.set(f"{{{NS['cp']}}}screencoord", f"({x}, {y})")
            el.set(f"{{{NS['cp']}}}size", f"({w}, {h})")
        except Exception:
            pass
        try:
            text = acc.queryText()
            el.text = text.getText(0, min(text.characterCount, 4096))
        except Exception:
            pass
        try:
            el.set(f"{{{NS['val']}}}value", str(acc.queryValue().currentValue))
        except Exception:
            pass
        for i in range(min(acc.childCount, MAX_CHILDREN)):
            if time.monotonic() > deadline:
                break
            child = _node(acc.getChildAtIndex(i), depth + 1, budget, deadline)
            if child is not None:
                el.append(child)
        return el
    except Exception:  # an app closing mid-walk: skip its node
        return None


def accessibility_tree(deadline: float | None = None) -> str:
    """The whole desktop as XML (`desktop-frame` root, one child per application), cut short at `deadline`."""
    deadline = time.monotonic() + DEFAULT_SECONDS if deadline is None else deadline
    pyatspi = _pyatspi()
    for prefix, uri in NS.items():
        ET.register_namespace(prefix, uri)
    root = ET.Element("desktop-frame", {"name": "main"})
    budget = [MAX_NODES]
    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        if time.monotonic() > deadline:
            break
        child = _node(desktop.getChildAtIndex(i), 1, budget, deadline)
        if child is not None:
            root.append(child)
    return ET.tostring(root, encoding="unicode")


def terminal_text(deadline: float | None = None) -> str | None:
    """Text of the first terminal widget a terminal app exposes over AT-SPI; None when none is found by `deadline`."""
    deadline = time.monotonic() + DEFAULT_SECONDS if deadline is None else deadline
    try:
        pyatspi = _pyatspi()
        desktop = pyatspi.Registry.getDesktop(0)
        apps = []
        for i in range(desktop.childCount):
            if time.monotonic() > deadline:
                return None
            apps.append(desktop.getChildAtIndex(i))
    except Exception:
        return None
    # only terminal applications (gnome-terminal-server, xfce4-terminal, ...): walking LibreOffice's tree on
    # every setup call (OSWorld's SetupController pings /terminal) would cost a second
    stack = []
    for app in apps:
        try:
            if app is not None and "term" in (app.name or "").lower():
                stack.append(app)
        except Exception:
            continue
    seen = 0
    while stack and seen < MAX_NODES and time.monotonic() < deadline:
        acc = stack.pop()
        seen += 1
        try:
            if acc.getRoleName() == "terminal":
                text = acc.queryText()
                return text.getText(0, text.characterCount)
            for i in range(min(acc.childCount, MAX_CHILDREN)):
                if time.monotonic() > deadline:
                    return None
                stack.append(acc.getChildAtIndex(i))
        except Exception:
            continue
    return None


def main() -> None:
    """`python desktop_a11y.py tree|terminal SECONDS`: the result as JSON on stdout (the server runs each walk in a
    fresh process: AT-SPI's connection in a long-lived process outlives the session bus a revert replaces)."""
    import json
    import sys

    mode, seconds = sys.argv[1], float(sys.argv[2])
    deadline = time.monotonic() + seconds
    result = accessibility_tree(deadline) if mode == "tree" else terminal_text(deadline)
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
