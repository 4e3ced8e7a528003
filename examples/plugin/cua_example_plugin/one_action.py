"""The `pyautogui_one` action format: pyautogui code, one action a turn (OSWorld's single-step agents), the prompt
pyautogui's plus that rule. Its spec is everything the class says or inherits; nothing else in verl-cua names it."""

from __future__ import annotations

from verl_cua.actions import ActionError, register_format
from verl_cua.actions.formats.base import FormatResult, ParseContext
from verl_cua.actions.formats.pyautogui import PyAutoGUIFormat

RULE = "Take exactly one action per turn."


@register_format("pyautogui_one")
class OneActionPyAutoGUI(PyAutoGUIFormat):
    """pyautogui's parser, writer and image size; a turn with more than one action is invalid."""

    name = "pyautogui_one"

    def parse(self, text: str, ctx: ParseContext) -> FormatResult:
        """pyautogui's parse; more than one action raises `ActionError` naming how many."""
        result = super().parse(text, ctx)
        if len(result.actions) > 1:
            raise ActionError(f"pyautogui_one takes one action per turn, got {len(result.actions)}")
        return result

    def system_prompt(self, size: tuple[int, int]) -> tuple[str, None]:
        """pyautogui's system prompt with the one-action rule appended."""
        system, tools = super().system_prompt(size)
        return f"{system}\n{RULE}", tools
