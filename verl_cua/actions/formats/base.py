"""What every output format module imports: `ParseContext`, `FormatResult`, the `OutputFormat` protocol (the format
spec: parsing and writing, and what a model of the format is shown), `BaseFormat` (its defaults), the registry
(`@register_format(name)` above each format class, `get_format(name)`). The package loads the built-ins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from verl_cua.actions.geometry import CoordinateSpace, ResizeLimits, capped_resize
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
    """One model output format, its spec: how to detect, parse and write it, and what its model is shown (system
    prompt, user turn, image size, per-turn context). `BaseFormat` gives the defaults of everything but the parsing
    and the system prompt; `register_format` refuses a class that lacks a member."""

    name: str
    trainable: bool  # an open model is trained on it here (verl's and verl-agent's configs accept it)
    resize: ResizeLimits | None  # the model's image processor limits, where the format belongs to one model family
    # optional, read with getattr: an action whose point is set-of-marks mark 3 (`tag_3`), as the format writes it
    mark_example: str

    def detect(self, text: str) -> bool:
        """Cheap check used by `format="auto"`: does this text look like this format?"""

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """The range the model's coordinates live in, mapped onto `screen`."""

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """Parse `text` into actions; raise `ActionError` with a one-line reason when it cannot."""

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """Write `actions` (screen pixels) as this model's text; raise `ActionError` for what it cannot say."""

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, list[dict] | None]:
        """The system message and tool definitions (None: none) for coordinates in a `size` (width, height) space."""

    def user_text(self, instruction: str, context: str | None) -> str:
        """The first user turn's text beside the screenshot; `context`: `turn_context` of the first observation."""

    def model_image_size(self, screen: tuple[int, int], max_pixels: int | None) -> tuple[int, int]:
        """The size a `screen`-sized screenshot is sent to the model at (capped at `max_pixels` pixels)."""

    def turn_context(self, extra: Mapping[str, Any] | None) -> str | None:
        """What the format shows beside each screenshot, from the observation's `extra`; None: nothing."""

    def longest_turn_context(self) -> str:
        """The longest `turn_context` the format can show (token budgets); "" for a format that shows none."""


# what `register_format` checks a class for: the protocol's members
FORMAT_MEMBERS = (
    *("name", "trainable", "resize", "detect", "coordinate_space", "parse", "render", "system_prompt"),
    *("user_text", "model_image_size", "turn_context", "longest_turn_context"),
)


class BaseFormat:
    """The spec's defaults: trainable, no resize of its own (the model sees the screen), `Task: ...` as the user
    turn, no per-turn context. A format overrides what differs; `detect`, `coordinate_space`, `parse`, `render` and
    `system_prompt` are its own."""

    name = ""
    trainable = True
    resize: ResizeLimits | None = None
    mark_example = ""  # no example: the prompt says "tag_N" in prose

    def user_text(self, instruction: str, context: str | None) -> str:
        """`Task: <instruction>`, then the turn's context on its own line."""
        return f"Task: {instruction}" + (f"\n{context}" if context else "")

    def model_image_size(self, screen: tuple[int, int], max_pixels: int | None) -> tuple[int, int]:
        """With `resize`: the processor's own resize (capped at `max_pixels`), so a server changes nothing; without:
        the screen itself, whose pixels the coordinates are (a server's processor resizes it as it must)."""
        if self.resize is not None:
            return capped_resize(screen, self.resize, max_pixels)
        return int(screen[0]), int(screen[1])

    def turn_context(self, extra: Mapping[str, Any] | None) -> str | None:
        """Nothing beside the screenshot."""
        return None

    def longest_turn_context(self) -> str:
        """No per-turn context."""
        return ""


FORMAT_REGISTRY: Registry[OutputFormat] = Registry("action format", "formats", extra_valid=("auto",))


def cannot(fmt: str, action: GUIAction, reason: str) -> ActionError:
    """The error a writer raises for an action its format cannot express: names the format and the action."""
    return ActionError(f"{fmt} cannot express {describe(action)}: {reason}")


def describe(action: GUIAction) -> str:
    """A short form of an action for error messages, e.g. `scroll(dx=3, dy=-2)`."""
    fields = {k: v for k, v in action.to_dict().items() if k != "kind" and v is not None}
    return f"{action.kind}({', '.join(f'{k}={v!r:.30}' for k, v in fields.items())})"


def register_format(name: str) -> Callable[[type], type]:
    """Class decorator: register one instance of an `OutputFormat` under `name`; a class that lacks a member of the
    spec raises TypeError (one line naming them) here, not a KeyError at its first prompt."""
    register = FORMAT_REGISTRY.register(name)

    def decorator(cls: type) -> type:
        missing = [m for m in FORMAT_MEMBERS if not hasattr(cls, m)]
        if missing:
            raise TypeError(
                f"action format {name!r} ({cls.__module__}:{cls.__qualname__}) lacks {', '.join(missing)}; subclass "
                "verl_cua.actions.formats.BaseFormat for the defaults of trainable, resize, user_text, "
                "model_image_size, turn_context and longest_turn_context"
            )
        return register(cls)

    return decorator


def trainable_formats() -> tuple[str, ...]:
    """The registered formats an open model is trained on here (their spec says `trainable`), sorted: what
    `cua.action.format` and verl-agent's `env.<name>.format` accept."""
    return tuple(name for name, fmt in sorted(FORMAT_REGISTRY.items()) if fmt.trainable)


def get_format(name: str) -> OutputFormat:
    """The registered format `name`; unknown names raise ValueError listing the valid ones (`auto` among them)."""
    return FORMAT_REGISTRY.lookup(name)
