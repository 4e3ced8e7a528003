"""App APIs of the `api_gui` action format, as specs: a tool class (`CalcTools`), a method, the app it serves and
its parameters with their limits. Specs only: the code that runs an API lives with the desktops
(`verl_cua.envs.osworld.apis`) and runs inside the desktop's sandbox, never here.

A call is data, never code: `ApiSpec.bind` binds literal arguments to a spec's parameters and checks each one's type
and size, so what reaches a desktop is `(tool, name, {param: value})` with JSON values only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from verl_cua.actions.types import ActionError

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()
MAX_TEXT = 4000  # characters of one str argument
MAX_CELLS = 2000  # values of one table/list argument
MAX_INT = 1_000_000
MAX_RESULT_CHARS = 2000  # an API's result text, as the next turn shows it
_CELL = re.compile(r"\$?[A-Za-z]{1,3}\$?[0-9]{1,7}")
_RANGE = re.compile(rf"{_CELL.pattern}(?::{_CELL.pattern})?")
PARAM_TYPES = ("str", "int", "float", "bool", "cell", "range", "path", "str_list", "table", "value")


@dataclass(frozen=True)
class Param:
    """One parameter: name, type (one of PARAM_TYPES), a one-line doc, a default (REQUIRED: none), choices."""

    name: str
    type: str
    doc: str
    default: Any = REQUIRED
    choices: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"unknown API parameter type {self.type!r}; valid: {', '.join(PARAM_TYPES)}")

    @property
    def required(self) -> bool:
        """Whether a call must give it."""
        return self.default is REQUIRED

    def describe(self) -> str:
        """`name: type` or `name: type = default`, as the prompt lists it."""
        kind = "|".join(repr(c) for c in self.choices) if self.choices else self.type
        return f"{self.name}: {kind}" if self.required else f"{self.name}: {kind} = {self.default!r}"


@dataclass(frozen=True)
class ApiSpec:
    """One app API: `tool.name(params)`, the OSWorld app key it serves (`libreoffice_calc`; `desktop`: any)."""

    tool: str
    name: str
    app: str
    doc: str
    params: tuple[Param, ...] = ()
    returns: str = "a one-line status"

    @property
    def qualname(self) -> str:
        """`CalcTools.set_cell_value`."""
        return f"{self.tool}.{self.name}"

    def signature(self) -> str:
        """The prompt's line for it: `CalcTools.set_cell_value(cell: cell, value: value)  # doc`."""
        return f"{self.qualname}({', '.join(p.describe() for p in self.params)})  # {self.doc}"

    def bind(self, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Literal positional and keyword arguments -> {param: checked value}, defaults filled in; ActionError."""
        if len(args) > len(self.params):
            raise ActionError(f"{self.qualname} takes at most {len(self.params)} arguments, got {len(args)}")
        names = [p.name for p in self.params]
        bound = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in names:
                valid = ", ".join(names) or "none"
                raise ActionError(f"{self.qualname} has no parameter {key!r:.40}; valid: {valid}")
            if key in bound:
                raise ActionError(f"{self.qualname} got {key!r} twice")
            bound[key] = value
        out = {}
        for p in self.params:
            if p.name not in bound:
                if p.required:
                    raise ActionError(f"{self.qualname} needs {p.name!r} ({p.doc})")
                out[p.name] = p.default
                continue
            if bound[p.name] is None and p.default is None:  # an optional "leave as is" given explicitly
                out[p.name] = None
                continue
            out[p.name] = check_value(self.qualname, p, bound[p.name])
        return out


def check_value(where: str, p: Param, value: Any) -> Any:
    """`value` checked against `p`'s type, size and choices (ints given for floats become floats); ActionError."""
    bad = ActionError(f"{where}: {p.name} must be {p.type}, got {type(value).__name__}")
    if p.type == "bool":
        if not isinstance(value, bool):
            raise bad
    elif p.type == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        if abs(value) > MAX_INT:
            raise ActionError(f"{where}: {p.name}={value} is out of range (at most {MAX_INT})")
    elif p.type == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e12:
            raise bad
        value = float(value)
    elif p.type == "value":  # a cell's content: text, a number or a formula string
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad
        _check_text(where, p, value)
    elif p.type == "str_list":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise bad
        if len(value) > MAX_CELLS:
            raise ActionError(f"{where}: {p.name} has {len(value)} items; at most {MAX_CELLS}")
        value = [_check_text(where, p, v) for v in value]
    elif p.type == "table":
        value = _check_table(where, p, value, bad)
    else:  # str, cell, range, path
        if not isinstance(value, str):
            raise bad
        _check_text(where, p, value)
        if p.type == "cell" and not _CELL.fullmatch(value):
            raise ActionError(f"{where}: {p.name}={value!r:.40} is not a cell reference like B7")
        if p.type == "range" and not _RANGE.fullmatch(value):
            raise ActionError(f"{where}: {p.name}={value!r:.40} is not a cell range like A1:D1")
        if p.type == "path":
            _check_path(where, p, value)
    if p.choices is not None and value not in p.choices:
        raise ActionError(f"{where}: {p.name}={value!r:.40}; valid: {', '.join(map(repr, p.choices))}")
    return value


def _check_text(where: str, p: Param, value: Any) -> Any:
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ActionError(f"{where}: {p.name} is {len(value)} characters; at most {MAX_TEXT}")
        if "\x00" in value:
            raise ActionError(f"{where}: {p.name} contains a NUL character")
    elif isinstance(value, float) and (value != value or abs(value) > 1e300):
        raise ActionError(f"{where}: {p.name} is not a finite number")
    return value


def _check_table(where: str, p: Param, value: Any, bad: ActionError) -> list[list[Any]]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(row, (list, tuple)) for row in value):
        raise bad
    if sum(len(row) for row in value) > MAX_CELLS:
        raise ActionError(f"{where}: {p.name} has over {MAX_CELLS} cells")
    cell = Param(p.name, "value", p.doc)
    return [[check_value(where, cell, v) for v in row] for row in value]


def _check_path(where: str, p: Param, value: str) -> None:
    """A path in the desktop user's home: `~/x`, or relative to home; no `..`, no control characters."""
    parts = value.replace("\\", "/").split("/")
    if value.startswith("/") or (parts[0] != "~" and parts[0].startswith("~")):
        raise ActionError(f"{where}: {p.name}={value!r:.60} must be under the home folder (~/...)")
    if ".." in parts or any(ord(c) < 32 for c in value):
        raise ActionError(f"{where}: {p.name}={value!r:.60} may not contain '..' or control characters")
