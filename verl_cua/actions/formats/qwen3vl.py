"""Qwen3-VL: `computer_use` tool calls with coordinates normalised to 0..1000 of the screen."""

from __future__ import annotations

from verl_cua.actions.formats.base import BaseFormat, FormatResult, ParseContext, register_format
from verl_cua.actions.formats.computer_use import (
    computer_use_prompt,
    detect_tool_call,
    parse_tool_calls,
    render_tool_calls,
)
from verl_cua.actions.geometry import QWEN3VL_RESIZE, CoordinateSpace
from verl_cua.actions.types import GUIAction

NORMALISED_RANGE = 1000


@register_format("qwen3vl")
class Qwen3VLFormat(BaseFormat):
    """`<tool_call>{"name": "computer_use", "arguments": {"action": ..., "coordinate": [x, y]}}</tool_call>`."""

    name = "qwen3vl"
    mark_example = '{"action": "left_click", "coordinate": "tag_3"}'  # a point named by its set-of-marks mark
    resize = QWEN3VL_RESIZE

    def detect(self, text: str) -> bool:
        """Same tool-call shape as qwen25vl."""
        return detect_tool_call(text)

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """0..1000 on both axes, whatever the screen or image size."""
        return CoordinateSpace(NORMALISED_RANGE, NORMALISED_RANGE, screen[0], screen[1])

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """Every tool call in the output, in order."""
        return parse_tool_calls(text, ctx)

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """Thought prose, then one `computer_use` tool call per action."""
        return render_tool_calls(self.name, actions, space, thought)

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, list[dict]]:
        """Qwen-VL's computer-use prompt with its `computer_use` tool, coordinates in `size`."""
        return computer_use_prompt(size)
