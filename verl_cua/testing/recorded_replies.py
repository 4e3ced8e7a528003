"""Recorded Anthropic and OpenAI-compatible responses (written here, not downloaded) and the fake desktop they were
recorded against: the eval tests check the API adapters with them, the SFT tests convert the runs they give."""

from __future__ import annotations

from PIL import Image

from verl_cua.envs import Observation, StepResult
from verl_cua.envs.base import step_info

SCREEN = (1920, 1080)
INSTRUCTION = "Press the Submit button."

# vLLM serving Qwen3-VL (no tool parser): the tool call is in the text, coordinates 0..1000
OPENAI_TEXT = {
    "id": "chatcmpl-7f3a",
    "object": "chat.completion",
    "model": "Qwen/Qwen3-VL-8B-Instruct",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": 'The Submit button is in the middle.\n<tool_call>\n{"name": "computer_use", "arguments": '
                '{"action": "left_click", "coordinate": [500, 500]}}\n</tool_call>',
                "tool_calls": [],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 2710, "completion_tokens": 41, "total_tokens": 2751},
}
# vLLM with --enable-auto-tool-choice --tool-call-parser hermes: the call extracted into tool_calls
OPENAI_TOOL_CALLS = {
    "id": "chatcmpl-91bc",
    "object": "chat.completion",
    "model": "Qwen/Qwen3-VL-8B-Instruct",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "The Submit button is in the middle.",
                "tool_calls": [
                    {
                        "id": "chatcmpl-tool-1",
                        "type": "function",
                        "function": {
                            "name": "computer_use",
                            "arguments": '{"action": "left_click", "coordinate": [500, 500]}',
                        },
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 2710, "completion_tokens": 41, "total_tokens": 2751},
}
# Anthropic Messages API, computer_20250124 tool on the 1280x720 screenshot
ANTHROPIC = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "text", "text": "The Submit button is in the middle."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "computer",
            "input": {"action": "left_click", "coordinate": [640, 360]},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 2500, "cache_read_input_tokens": 210, "output_tokens": 41},
}
ANTHROPIC_DONE = {**ANTHROPIC, "content": [{"type": "text", "text": "Submitted."}], "stop_reason": "end_turn"}
OPENAI_DONE = {
    **OPENAI_TEXT,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", '
                '"status": "success"}}\n</tool_call>',
            },
            "finish_reason": "stop",
        }
    ],
}


class FakeDesktop:
    """A fake 1920x1080 desktop (it stands in for a VM): records the actions it gets; the task is done after a
    click at the centre."""

    def __init__(self):
        self.actions = []

    def reset(self, task):
        self.actions = []
        return Observation(Image.new("RGB", SCREEN, (200, 200, 200)), INSTRUCTION)

    def step(self, action, *, format=None):
        self.actions += action.actions
        return StepResult(Observation(Image.new("RGB", SCREEN, (90, 90, 90)), INSTRUCTION), 0.0, False, step_info(
            action_valid=action.valid))  # fmt: skip

    def evaluate(self):
        return float(any(a.kind == "click" and (a.x, a.y) == (960, 540) for a in self.actions))

    def close(self):
        pass
