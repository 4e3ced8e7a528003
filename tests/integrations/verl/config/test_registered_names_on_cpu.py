"""`cua.action.format` takes what the format registry holds: a format registered with `register_format` whose spec
says trainable (G2: the config used to refuse any format not in a hand-typed list); an untrainable format is refused
in one line naming the valid ones. (Registered envs as `cua.env.name`: test_config_on_cpu.py.)"""

import pytest

from verl_cua.actions import FORMAT_REGISTRY, get_format, register_format
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.schema import CuaConfig


@pytest.fixture
def dialect():
    """`dialect`: pyautogui's class under another name (a plug-in's format), removed after the test."""
    register_format("dialect")(type("Dialect", (type(get_format("pyautogui")),), {"name": "dialect"}))
    yield "dialect"
    FORMAT_REGISTRY.pop("dialect", None)


def test_a_registered_trainable_format_is_a_valid_action_format(dialect):
    assert CuaConfig.from_mapping({"action": {"format": dialect}}).action.format == dialect
    from verl_cua.integrations.verl_agent.settings import read_settings

    assert read_settings("miniwob", {"format": dialect}).format == dialect  # verl-agent's env section too


def test_an_untrainable_format_is_refused_naming_the_trainable_ones(dialect):
    with pytest.raises(CuaConfigError) as err:
        CuaConfig.from_mapping({"action": {"format": "claude"}})
    assert str(err.value) == (
        "cua.action.format='claude' is not valid; valid: api_gui, dialect, pyautogui, qwen25vl, qwen3vl, uitars"
    )
