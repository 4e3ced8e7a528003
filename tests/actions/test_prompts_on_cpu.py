"""Prompts: one per format, with the coordinate space the parser reads filled in."""

import json
import re

import pytest

from verl_cua.actions import available_formats, parse_action
from verl_cua.actions.formats.computer_use import COMPUTER_USE_ACTIONS
from verl_cua.actions.prompts import build_prompt

SCREEN = (1920, 1080)


@pytest.mark.parametrize(
    "fmt,size",
    [("qwen3vl", "1000x1000"), ("qwen25vl", "1932x1092"), ("uitars", "1932x1092"), ("pyautogui", "1920x1080")],
)
def test_system_prompt_states_the_coordinate_space_the_parser_uses(fmt, size):
    assert size in build_prompt(fmt, screen=SCREEN).system


def test_qwen_tool_schema_lists_every_action_the_parser_accepts():
    spec = build_prompt("qwen3vl", screen=SCREEN)
    schema = json.loads(re.search(r"<tools>\n(.*)\n</tools>", spec.system, re.S).group(1))
    assert schema["name"] == "computer_use"
    assert schema["parameters"]["properties"]["action"]["enum"] == list(COMPUTER_USE_ACTIONS)
    assert spec.tools[0]["function"] == schema


def test_claude_tool_uses_the_scaled_screenshot_size():
    tool = build_prompt("claude", screen=SCREEN, image=(1280, 720)).tools[0]
    assert (tool["name"], tool["display_width_px"], tool["display_height_px"]) == ("computer", 1280, 720)


def test_uitars_prompt_examples_parse():
    system = build_prompt("uitars", screen=SCREEN).system
    lines = [line.split(" #")[0] for line in system.split("## Action Space\n")[1].split("\n\n")[0].splitlines()]
    for line in lines:
        example = line.replace("(x1,y1)", "(10,10)").replace("(x3,y3)", "(20,20)").replace("key=''", "key='enter'")
        example = example.replace("'down or up or right or left'", "'down'").replace("content=''", "content='a'")
        result = parse_action(f"Thought: t\nAction: {example}", format="uitars", screen=SCREEN)
        assert result.valid, (example, result.error)


def test_every_format_has_a_prompt_and_unknown_ones_list_the_valid():
    for fmt in available_formats():
        if fmt != "auto":
            assert build_prompt(fmt, screen=SCREEN).user_text("Save the file").count("Save the file") == 1
    with pytest.raises(ValueError, match="valid formats"):
        build_prompt("gpt5", screen=SCREEN)


def test_a_turn_shows_the_env_s_element_table_after_the_format_s_own_context():
    from verl_cua.actions.prompts import turn_context

    table = "Elements on the screen:\ntag\ttext\nbutton\tOK"
    assert turn_context("pyautogui", {"task": "click-test"}) is None  # the control: a screenshot alone
    assert turn_context("pyautogui", {"elements_text": table}) == table
    both = turn_context("api_gui", {"focused_app": "calc", "api_result": "ok", "elements_text": table})
    assert both.endswith("\n" + table) and both.startswith(
        turn_context("api_gui", {"focused_app": "calc", "api_result": "ok"})
    )
