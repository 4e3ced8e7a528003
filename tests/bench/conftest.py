"""Fixtures for the bench smoke tests: the trainer's start-up checks on a bench's training command."""

import pytest

CONFIG_MODULE = "verl_cua.integrations.verl.config"


@pytest.fixture(scope="session")
def trainer_config():
    """`check(cmd)`: the Hydra overrides of a `python -m verl_cua.main ...` command composed on `cua_trainer` and
    checked as `verl_cua.main` checks them before Ray starts (`launch.checked_config`); the resolved config. No
    training: what a bench would hand verl, refused here in one line if a key moved."""
    from hydra import compose, initialize_config_module

    from verl_cua.integrations.verl.launch import checked_config
    from verl_cua.integrations.verl.plugin import register_estimators

    register_estimators()  # sdpo, sdpo_grpo, gigpo, as the plugin registers them in verl's processes

    def check(cmd: list[str]) -> dict:
        assert cmd[1:3] == ["-m", "verl_cua.main"], cmd[:3]
        kept = [o for o in cmd[3:] if not o.startswith("hydra.")]
        with initialize_config_module(CONFIG_MODULE, version_base=None):
            return checked_config(compose("cua_trainer", overrides=kept))

    return check


@pytest.fixture(scope="session")
def tiny_qwen25vl() -> str:
    """The cached tiny Qwen2.5-VL (the short-run benches' default family)."""
    from verl_cua.testing.tiny_models import build_tiny_model

    return str(build_tiny_model("qwen25vl"))
