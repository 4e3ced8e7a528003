"""What every output format module imports: `ParseContext`, `FormatResult`, the `OutputFormat` protocol, the
registry (`@register_format(name)` above each parser class, `get_format(name)`). The package loads the built-ins."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from verl_cua.actions.geometry import CoordinateSpace
from verl_cua.actions.types import ActionError, GUIAction
from verl_cua.registry import Registry


@dataclass(slots=True)
class ParseContext:
    """What a format parser needs besides the text: the screen, its coordinate space, options, notes."""

    screen: tuple[int, int]
    space: CoordinateSpace
    allow_raw_code: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class FormatResult:
    """A parser's raw result before `parse_action` wraps it (notes, validation, limits)."""

    actions: list[GUIAction]
    thought: str | None = None
    code: str | None = None


class OutputFormat(Protocol):
    """One model output format: how to detect it, its coordinate space, how to parse it and write it."""

    name: str

    def detect(self, text: str) -> bool:
        """Cheap check used by `format="auto"`: does this text look like this format?"""

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """The range the model's coordinates live in, mapped onto `screen`."""

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """Parse `text` into actions; raise `ActionError` with a one-line reason when it cannot."""

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """Write `actions` (screen pixels) as this model's text; raise `ActionError` for what it cannot say."""


FORMAT_REGISTRY: Registry[OutputFormat] = Registry("action format", "formats", extra_valid=("auto",))


def cannot(fmt: str, action: GUIAction, reason: str) -> ActionError:
    """The error a writer raises for an action its format cannot express: names the format and the action."""
    return ActionError(f"{fmt} cannot express {describe(action)}: {reason}")


def describe(action: GUIAction) -> str:
    """A short form of an action for error messages, e.g. `scroll(dx=3, dy=-2)`."""
    fields = {k: v for k, v in action.to_dict().items() if k != "kind" and v is not None}
    return f"{action.kind}({', '.join(f'{k}={v!r:.30}' for k, v in fields.items())})"


def register_format(name: str) -> Callable[[type], type]:
    """Class decorator: register one instance of an `OutputFormat` under `name`."""
    return FORMAT_REGISTRY.register(name)


def get_format(name: str) -> OutputFormat:
    """The registered format `name`; unknown names raise ValueError listing the valid ones (`auto` among them)."""
    return FORMAT_REGISTRY.lookup(name)
