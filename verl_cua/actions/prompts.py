"""What each format's model is shown, read from its spec (`verl_cua.actions.formats`): one source of truth for
training, eval and SFT data. The texts themselves live in each format's own file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl_cua.actions.formats import get_format
from verl_cua.actions.geometry import check_size


@dataclass(frozen=True)
class PromptSpec:
    """What to send a model: a system message, tool definitions for APIs that take them apart, the user turn."""

    format: str
    system: str
    tools: list[dict] | None
    coordinate_space: tuple[float, float]

    def user_text(self, instruction: str, context: str | None = None) -> str:
        """The first user turn's text (the screenshot goes beside it as an image part); `context`: `turn_context`."""
        return get_format(self.format).user_text(instruction, context)


def observation_text(step: int, error: str | None = None, context: str | None = None) -> str:
    """A later user turn's text, beside the screenshot taken after `step`; `error`: why the last output was invalid;
    `context`: what the format adds each turn (`turn_context`)."""
    note = f" Your last output was not a valid action ({error})." if error else ""
    return f"Screenshot after step {step}.{note}" + (f"\n{context}" if context else "")


def turn_context(format: str, extra: Mapping[str, Any] | None) -> str | None:
    """What a turn shows beside its screenshot, from an observation's `extra`: what `format` adds (api_gui: the
    focused app, its APIs and the last API result), then the env's element table or marks (`elements_text`, for an
    observation type other than `screenshot`: `verl_cua.envs.observation`); None where there is neither."""
    parts = [get_format(format).turn_context(extra), (extra or {}).get("elements_text")]
    return "\n".join(p for p in parts if p) or None


def longest_turn_context(format: str) -> str:
    """The longest `turn_context` of `format` (for token budgets); "" when it shows none."""
    return get_format(format).longest_turn_context()


def build_prompt(format: str, *, screen: tuple[int, int], image: tuple[int, int] | None = None) -> PromptSpec:
    """The prompt for `format` on a `screen`-sized desktop (`image`: the size the model sees, where it matters)."""
    screen = check_size(screen, "screen")
    if image is not None:
        image = check_size(image, "image")
    fmt = get_format(format)
    space = fmt.coordinate_space(screen, image)
    system, tools = fmt.system_prompt((int(space.width), int(space.height)))
    return PromptSpec(format=format, system=system, tools=tools, coordinate_space=(space.width, space.height))
