"""Qwen2.5-VL: `computer_use` tool calls with coordinates in pixels of the resized image the model saw."""

from __future__ import annotations

from verl_cua.actions.formats.base import BaseFormat, FormatResult, ParseContext, register_format
from verl_cua.actions.formats.computer_use import (
    computer_use_prompt,
    detect_tool_call,
    parse_tool_calls,
    render_tool_calls,
)
from verl_cua.actions.geometry import QWEN25VL_RESIZE, CoordinateSpace, smart_resize_size
from verl_cua.actions.types import GUIAction


@register_format("qwen25vl")
class Qwen25VLFormat(BaseFormat):
    """Like qwen3vl, but `coordinate` is in the `image` the processor produced (default: smart_resize(screen))."""

    name = "qwen25vl"
    mark_example = '{"action": "left_click", "coordinate": "tag_3"}'  # a point named by its set-of-marks mark
    resize = QWEN25VL_RESIZE

    def detect(self, text: str) -> bool:
        """Same tool-call shape as qwen3vl."""
        return detect_tool_call(text)

    def coordinate_space(self, screen: tuple[int, int], image: tuple[int, int] | None) -> CoordinateSpace:
        """The resized image's pixels; by default Qwen2.5-VL's processor limits (factor 28)."""
        width, height = image if image is not None else smart_resize_size(screen, **self.resize)
        return CoordinateSpace(width, height, screen[0], screen[1])

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """Every tool call in the output, in order."""
        return parse_tool_calls(text, ctx)

    def render(self, actions: list[GUIAction], space: CoordinateSpace, thought: str | None) -> str:
        """Thought prose, then one `computer_use` tool call per action."""
        return render_tool_calls(self.name, actions, space, thought)

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, list[dict]]:
        """Qwen-VL's computer-use prompt with its `computer_use` tool, coordinates in `size`."""
        return computer_use_prompt(size)
