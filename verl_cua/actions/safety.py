"""Model-written pyautogui code is hostile input: parse it with `ast`, accept only allow-listed literal calls.

Nothing here executes or evaluates model text. A statement that is not an allow-listed call with literal
arguments makes the whole output invalid, with an error naming the construct.
"""

from __future__ import annotations

import ast
import logging
import math
from dataclasses import dataclass

from verl_cua.actions import python_ast
from verl_cua.actions.geometry import MARK_NAME, Mark
from verl_cua.actions.types import MAX_ACTIONS, ActionError

logger = logging.getLogger(__name__)

ALLOWED_MODULES = ("pyautogui", "time")
ALLOWED_CALLS: dict[str, frozenset[str]] = {
    "pyautogui": frozenset(
        {
            "click",
            "doubleClick",
            "tripleClick",
            "rightClick",
            "middleClick",
            "moveTo",
            "dragTo",
            "scroll",
            "vscroll",
            "hscroll",
            "write",
            "typewrite",
            "press",
            "hotkey",
            "keyDown",
            "keyUp",
            "mouseDown",
            "mouseUp",
            "sleep",
        }
    ),
    "time": frozenset({"sleep"}),
}
# `pyautogui.FAILSAFE = False` and `pyautogui.PAUSE = 0.1` are settings some models write; they are ignored.
IGNORED_SETTINGS = frozenset({"FAILSAFE", "PAUSE"})
MAX_STATEMENTS = 2 * MAX_ACTIONS + 8  # rendering writes at most two lines per action (moveTo + dragTo)
MAX_SEQUENCE = 32
MAX_NUMBER = 1e7

_STATEMENT_NAMES = {
    ast.For: "for loop",
    ast.AsyncFor: "for loop",
    ast.While: "while loop",
    ast.If: "if statement",
    ast.With: "with statement",
    ast.AsyncWith: "with statement",
    ast.FunctionDef: "function definition",
    ast.AsyncFunctionDef: "function definition",
    ast.ClassDef: "class definition",
    ast.Try: "try statement",
    ast.Assign: "assignment",
    ast.AugAssign: "assignment",
    ast.AnnAssign: "assignment",
    ast.Delete: "del statement",
    ast.Global: "global statement",
    ast.Nonlocal: "nonlocal statement",
    ast.Raise: "raise statement",
    ast.Return: "return statement",
    ast.Assert: "assert statement",
    ast.ImportFrom: "from-import",
}
_ARITH = {ast.Add: float.__add__, ast.Sub: float.__sub__, ast.Mult: float.__mul__, ast.Div: float.__truediv__}


@dataclass(slots=True)
class SafeCall:
    """One allow-listed call with literal arguments: `module.func(*args, **kwargs)`."""

    module: str
    func: str
    args: list
    kwargs: dict
    line: int


def parse_code(code: str) -> ast.Module:
    """Model-written code as an ast module (parsed, never run); a NUL byte or bad syntax is a one-line ActionError."""
    if "\x00" in code:
        raise ActionError("code contains a NUL byte")
    try:
        return python_ast.parse(code)
    except SyntaxError as exc:
        raise ActionError(f"code is not valid Python: {exc.msg} (line {exc.lineno})") from None


def check_code(code: str) -> list[SafeCall]:
    """Parse `code` with ast and return its allow-listed calls; raise ActionError naming any other construct."""
    tree = parse_code(code)
    if len(tree.body) > MAX_STATEMENTS:
        raise ActionError(f"code has {len(tree.body)} statements; at most {MAX_STATEMENTS}")
    aliases: dict[str, str] = {}
    calls: list[SafeCall] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name not in ALLOWED_MODULES:
                    raise ActionError(f"import of {alias.name!r:.40} is not allowed (only pyautogui and time)")
                aliases[alias.asname or alias.name] = alias.name
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            calls.append(_check_call(stmt.value, aliases))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            continue  # a bare string used as a comment
        elif isinstance(stmt, ast.Pass):
            continue
        elif isinstance(stmt, ast.Assign) and _is_ignored_setting(stmt, aliases):
            continue
        elif isinstance(stmt, ast.Expr):
            raise ActionError(f"line {stmt.lineno}: expression {_describe(stmt.value)} is not allowed (only calls)")
        else:
            name = _STATEMENT_NAMES.get(type(stmt), f"{type(stmt).__name__} statement")
            raise ActionError(f"line {stmt.lineno}: {name} is not allowed")
    return calls


def _check_call(call: ast.Call, aliases: dict[str, str]) -> SafeCall:
    func = call.func
    line = call.lineno
    if isinstance(func, ast.Name):
        raise ActionError(f"line {line}: call to {func.id}() is not allowed")
    if not isinstance(func, ast.Attribute):
        raise ActionError(f"line {line}: call of {_describe(func)} is not allowed")
    if not isinstance(func.value, ast.Name):
        raise ActionError(f"line {line}: attribute chain {_dotted(func)} is not allowed")
    module = aliases.get(func.value.id, func.value.id if func.value.id in ALLOWED_MODULES else None)
    if module is None:
        raise ActionError(f"line {line}: call to {func.value.id}.{func.attr}() is not allowed")
    if func.attr not in ALLOWED_CALLS[module]:
        raise ActionError(f"line {line}: {module}.{func.attr}() is not an allowed call")
    args = [_literal(a, line) for a in call.args]
    kwargs = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise ActionError(f"line {line}: **kwargs is not allowed")
        kwargs[kw.arg] = _literal(kw.value, line)
    return SafeCall(module, func.attr, args, kwargs, line)


def _literal(node: ast.AST, line: int, depth: int = 0):
    """A literal argument value, or a `Mark` for a set-of-marks name (`tag_3`, OSWorld's SoM agents' point); other
    names, calls, f-strings and everything else raise ActionError."""
    if isinstance(node, ast.Name) and MARK_NAME.fullmatch(node.id):
        return Mark(int(MARK_NAME.fullmatch(node.id).group(1)))
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, (bool, str)) or value is None:
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _bounded(value, line)
        raise ActionError(f"line {line}: literal of type {type(value).__name__} is not allowed")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and depth < 4:
        value = _literal(node.operand, line, depth + 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ActionError(f"line {line}: sign applied to a non-number")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH and depth < 4:
        left, right = _literal(node.left, line, depth + 1), _literal(node.right, line, depth + 1)
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in (left, right)):
            raise ActionError(f"line {line}: arithmetic on non-numbers is not allowed")
        if isinstance(node.op, ast.Div) and right == 0:
            raise ActionError(f"line {line}: division by zero")
        result = _ARITH[type(node.op)](float(left), float(right))
        if isinstance(left, int) and isinstance(right, int) and not isinstance(node.op, ast.Div):
            result = int(result)
        return _bounded(result, line)
    if isinstance(node, (ast.Tuple, ast.List)) and depth < 2:
        if len(node.elts) > MAX_SEQUENCE:
            raise ActionError(f"line {line}: sequence of {len(node.elts)} items; at most {MAX_SEQUENCE}")
        return [_literal(e, line, depth + 1) for e in node.elts]
    if isinstance(node, ast.JoinedStr):
        raise ActionError(f"line {line}: f-string is not allowed (only literal arguments)")
    raise ActionError(f"line {line}: argument {_describe(node)} is not allowed (only literal arguments)")


def literal_value(node: ast.AST, line: int):
    """A literal argument's value (numbers bounded, sequences of at most MAX_SEQUENCE, nested two deep); ActionError
    for names, calls, f-strings and every other construct."""
    return _literal(node, line)


def _bounded(value: float, line: int) -> float:
    if isinstance(value, int) and abs(value) > MAX_NUMBER:  # before isfinite(): huge ints overflow a float
        raise ActionError(f"line {line}: number {str(value)[:20]}... out of bounds")
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise ActionError(f"line {line}: number {value!r:.20} out of bounds")
    return value


def _is_ignored_setting(stmt: ast.Assign, aliases: dict[str, str]) -> bool:
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Attribute):
        return False
    target = stmt.targets[0]
    return (
        isinstance(target.value, ast.Name)
        and aliases.get(target.value.id, target.value.id) == "pyautogui"
        and target.attr in IGNORED_SETTINGS
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, (bool, int, float))
    )


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "<expr>")
    return ".".join(reversed(parts))


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"name {node.id!r}"
    if isinstance(node, ast.Attribute):
        return f"attribute {_dotted(node)}"
    if isinstance(node, ast.Call):
        return f"nested call {_dotted(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) else '<expr>'}()"
    return type(node).__name__.lower()


def log_raw_code(code: str) -> None:
    """The explicit pass-through path for disposable VMs is logged every time it is used."""
    logger.warning("allow_raw_code=True: passing model-written code through unchecked (%d chars)", len(code))
