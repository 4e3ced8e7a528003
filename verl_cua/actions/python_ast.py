"""Python source parsed one thread at a time: on CPython 3.11 two threads building ast objects at once can corrupt
the parser's shared recursion counter (`SystemError: AST constructor recursion depth mismatch`, CPython gh-106905),
and env pools parse in threads (a model's actions; the first resets of 32 desktops read OSWorld's setup source
together). Every `ast.parse` of verl-cua goes through `parse`."""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    """`ast.parse(source, mode=mode)`, holding the module's lock."""
    with _LOCK:
        return ast.parse(source, mode=mode)
