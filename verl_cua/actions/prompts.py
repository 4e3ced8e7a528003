"""What each format's model is shown, read from its spec (`verl_cua.actions.formats`): one source of truth for
training, eval and SFT data. The texts themselves live in each format's own file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl_cua.actions.formats import get_format
from verl_cua.actions.geometry import check_size

_TABLE = "a table of the screen's elements (tag, text, top-left corner and size, in screenshot pixels)"
TEXT_ONLY = "a11y_tree"  # the observation type whose prompts hold no screenshot
# OSWorld's observation types (`cua.env.observation`, registered here): what each adds to the system prompt
OBSERVATION_GUIDES: dict[str, str] = {
    "screenshot": "",
    "a11y_tree": (
        f"You get no screenshot: each turn shows {_TABLE} instead. Give coordinates as your action format says, "
        "converting the table's pixels where its range differs"
    ),
    "screenshot_a11y_tree": f"Beside each screenshot you also get {_TABLE}.",
    "som": (
        "Each screenshot has the screen's elements outlined in red and numbered (marks), with the list of marks "
        "beside it. Wherever an action takes a point you may name a mark instead, tag_N for mark N, and the action "
        "lands on the centre of its box"
    ),
}


@dataclass(frozen=True)
class PromptSpec:
    """What to send a model: a system message, tool definitions for APIs that take them apart, the user turn."""

    format: str
    system: str
    tools: list[dict] | None
    coordinate_space: tuple[float, float]
    observation: str = "screenshot"  # what each turn shows (OSWorld's type): a11y_tree shows no screenshot

    @property
    def screenshot(self) -> bool:
        """Whether the model is shown screenshots (every observation type but `a11y_tree`, the table alone)."""
        return self.observation != TEXT_ONLY

    def shown(self, images: list[Any]) -> list[Any]:
        """The screenshots the model is given of `images`: all of them, or none for a text-only observation."""
        return list(images) if self.screenshot else []

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


def observation_guide(format: str, observation: str) -> str:
    """What the system prompt says of `observation` (OSWorld's type) for `format`; "" for `screenshot`."""
    if observation not in OBSERVATION_GUIDES:
        raise ValueError(f"unknown observation {observation!r}; valid: {', '.join(OBSERVATION_GUIDES)}")
    guide = OBSERVATION_GUIDES[observation]
    if observation == "som":
        example = getattr(get_format(format), "mark_example", "")  # optional in the spec
        guide += f", e.g. {example}." if example else "."
    return guide


def build_prompt(format: str, *, screen: tuple[int, int], image: tuple[int, int] | None = None,
                 observation: str = "screenshot") -> PromptSpec:  # fmt: skip
    """The prompt for `format` on a `screen`-sized desktop (`image`: the size the model sees, where it matters;
    `observation`: what each turn shows, OSWorld's type, which the system prompt explains)."""
    guide = observation_guide(format, observation)
    screen = check_size(screen, "screen")
    if image is not None:
        image = check_size(image, "image")
    fmt = get_format(format)
    space = fmt.coordinate_space(screen, image)
    system, tools = fmt.system_prompt((int(space.width), int(space.height)))
    system = f"{system}\n{guide}" if guide else system
    size = (space.width, space.height)
    return PromptSpec(format=format, system=system, tools=tools, coordinate_space=size, observation=observation)
