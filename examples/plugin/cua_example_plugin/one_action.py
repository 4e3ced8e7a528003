"""The `pyautogui_one` action format: pyautogui code, one action a turn (OSWorld's single-step agents). Its spec is
everything the class says or inherits; nothing else in verl-cua names it. Its prompt is pyautogui's, unchanged: a
checkpoint trained on pyautogui's prompt (the CPU tests' SFT model) reads it as its own, where one added line of rules
sent the tiny model's every reply off its format (measured: 32 of 32 turns invalid). A format with its own prompt
overrides `system_prompt(size)` and `user_text(...)` (verl_cua/actions/formats/base.py)."""

from __future__ import annotations

from verl_cua.actions import ActionError, register_format
from verl_cua.actions.formats.base import FormatResult, ParseContext
from verl_cua.actions.formats.pyautogui import PyAutoGUIFormat


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
