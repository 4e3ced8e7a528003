"""The composed `preset=cpu` trainer config, for tests and benchmarks that drive verl-cua's verl pieces directly."""

from __future__ import annotations

CONFIG_MODULE = "verl_cua.integrations.verl.config"


def cpu_config(model_path: str, *overrides: str):
    """`cua_trainer` with `preset=cpu` for `model_path`, plus Hydra overrides."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(CONFIG_MODULE, version_base=None):
        return compose(
            "cua_trainer", overrides=["preset=cpu", f"actor_rollout_ref.model.path={model_path}", *overrides]
        )
