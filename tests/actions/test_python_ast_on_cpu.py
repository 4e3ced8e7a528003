"""Python source is parsed one thread at a time (CPython 3.11's ast constructor shares a recursion counter between
threads: `SystemError: AST constructor recursion depth mismatch`, seen as an infra failure when 32 desktops' first
resets read OSWorld's setup source together), and no module of verl-cua calls `ast.parse` around the lock."""

import ast
import re
import threading
import time
from pathlib import Path

from verl_cua.actions import python_ast

ROOT = Path(__file__).resolve().parents[2]


def _most_at_once(parse, monkeypatch) -> int:
    """The most threads inside `ast.parse` at once when 8 threads call `parse` together (each parse takes 20 ms)."""
    inside, most, guard = 0, 0, threading.Lock()
    real = ast.parse

    def slow(source, *args, **kwargs):
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.02)
        try:
            return real(source, *args, **kwargs)
        finally:
            with guard:
                inside -= 1

    monkeypatch.setattr(ast, "parse", slow)
    threads = [threading.Thread(target=parse, args=("x = [1, (2, {3: 4})]",)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return most


def test_threads_parse_one_at_a_time_and_plain_ast_parse_would_not(monkeypatch):
    assert _most_at_once(python_ast.parse, monkeypatch) == 1
    assert _most_at_once(lambda source: ast.parse(source), monkeypatch) > 1  # the negative control: overlap is seen


def test_the_parse_is_ast_parse():
    assert ast.dump(python_ast.parse("f(1)")) == ast.dump(ast.parse("f(1)"))
    assert isinstance(python_ast.parse("1 + 2", mode="eval"), ast.Expression)


def test_no_module_calls_ast_parse_around_the_lock():
    calls = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("verl_cua", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "python_ast.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bast\.parse\(", line)
    ]
    assert not calls, calls
