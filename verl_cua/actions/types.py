"""The one action model every format parses into: `GUIAction` in screen pixels and `ParsedAction`."""

from __future__ import annotations

from dataclasses import dataclass, field

ACTION_KINDS: tuple[str, ...] = (
    "click",
    "double_click",
    "triple_click",
    "right_click",
    "middle_click",
    "move",
    "drag",
    "scroll",
    "type",
    "key",
    "wait",
    "done",
    "fail",
    "api",
)
POINTER_KINDS = frozenset({"click", "double_click", "triple_click", "right_click", "middle_click", "move"})
TERMINAL_KINDS = frozenset({"done", "fail"})
MAX_ACTIONS = 64  # per model output


class ActionError(ValueError):
    """A model output that cannot become actions; the message is the one-line reason."""


@dataclass(slots=True)
class GUIAction:
    """One GUI action in integer screen pixels; fields a kind does not use stay None.

    * pointer kinds use `x, y` (None means "at the current cursor position");
    * `drag` goes from `x, y` (None: from the current position) to `x2, y2`;
    * `scroll` uses pyautogui's sign: `dy > 0` scrolls up, `dx > 0` scrolls right; `x, y` optional;
    * `type` and the terminal kinds `done`/`fail` carry `text` (an answer or reason for the latter);
    * `key` holds one key or a chord as lower-case pyautogui key names, e.g. `["ctrl", "c"]`;
    * `api` (the `api_gui` format's app APIs) calls `api` (`CalcTools.set_cell_value`) with `args`, JSON values
      checked against its spec (`verl_cua.actions.apis`); it has no coordinates and runs inside the desktop.
    """

    kind: str
    x: int | None = None
    y: int | None = None
    x2: int | None = None
    y2: int | None = None
    text: str | None = None
    keys: list[str] | None = None
    dx: int | None = None
    dy: int | None = None
    api: str | None = None
    args: dict | None = None

    def to_dict(self) -> dict:
        """All fields, unused ones as None (stable keys for JSON and trajectories); `api` and `args` only on an api
        action, so GUI actions keep the keys they always had."""
        out = {
            "kind": self.kind,
            "x": self.x,
            "y": self.y,
            "x2": self.x2,
            "y2": self.y2,
            "text": self.text,
            "keys": list(self.keys) if self.keys is not None else None,
            "dx": self.dx,
            "dy": self.dy,
        }
        if self.kind == "api":
            out.update(api=self.api, args=dict(self.args or {}))
        return out

    @classmethod
    def from_dict(cls, data: dict) -> GUIAction:
        """Inverse of `to_dict`; unknown kinds raise ValueError listing the valid ones."""
        kind = data.get("kind")
        if kind not in ACTION_KINDS:
            raise ValueError(f"unknown action kind {kind!r}; valid kinds: {', '.join(ACTION_KINDS)}")
        keys = data.get("keys")
        return cls(
            kind=kind,
            x=data.get("x"),
            y=data.get("y"),
            x2=data.get("x2"),
            y2=data.get("y2"),
            text=data.get("text"),
            keys=list(keys) if keys is not None else None,
            dx=data.get("dx"),
            dy=data.get("dy"),
            api=data.get("api"),
            args=dict(data["args"]) if data.get("args") is not None else None,
        )


@dataclass(slots=True)
class ParsedAction:
    """The result of parsing one model output: valid actions, or `valid=False` with a one-line `error`.

    `error` may also be set on a valid result as a note (for example: coordinates outside the format's range
    were clamped). `code` is only set on the explicit `allow_raw_code=True` path for disposable VMs.
    """

    valid: bool
    error: str | None = None
    actions: list[GUIAction] = field(default_factory=list)
    thought: str | None = None
    format: str | None = None
    code: str | None = None

    @property
    def terminal(self) -> str | None:
        """`"done"` or `"fail"` if the output ends the episode, else None."""
        if self.actions and self.actions[-1].kind in TERMINAL_KINDS:
            return self.actions[-1].kind
        return None

    def to_pyautogui(self) -> str:
        """OSWorld `pyautogui` action: a code string, or the bare words `WAIT`, `DONE`, `FAIL`."""
        from verl_cua.actions.render import render_pyautogui

        if self.code is not None:
            return self.code
        if not self.valid:
            raise ValueError(f"cannot render an invalid action: {self.error}")
        return render_pyautogui(self.actions)

    def to_computer13(self) -> list[dict]:
        """OSWorld `computer_13` action dicts (`{"action_type": ..., "parameters": {...}}`)."""
        from verl_cua.actions.render import render_computer13

        if self.code is not None:
            raise ValueError("raw pass-through code has no computer_13 form; use the pyautogui action space")
        if not self.valid:
            raise ValueError(f"cannot render an invalid action: {self.error}")
        return render_computer13(self.actions)

    def to_dict(self) -> dict:
        """JSON-ready form used by the CLI, trajectories and the viewer."""
        return {
            "valid": self.valid,
            "error": self.error,
            "format": self.format,
            "thought": self.thought,
            "actions": [a.to_dict() for a in self.actions],
            "code": self.code,
        }


def invalid(error: str, *, fmt: str | None = None, thought: str | None = None) -> ParsedAction:
    """An invalid result with a one-line reason (newlines collapsed, length bounded)."""
    return ParsedAction(valid=False, error=one_line(error), actions=[], thought=thought, format=fmt)


def one_line(message: str, limit: int = 300) -> str:
    """Collapse whitespace to one line and cut very long messages (reasons quote model text)."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
