"""verl's side of `python -m verl_cua.main`: the trainer config checked as verl's `main` checks it plus ours
(`checked_config`), then training launched with verl's `run_ppo` and `CuaTaskRunner` (`launch`), so verl's launch
settings hold (`rollout.full_determinism`, nsys profiling, Ray timelines) and Ray's waits for resources are bounded.
The machine's preflight runs between the two, in the entry point (`verl_cua.main`), above this layer."""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_cua.integrations.ray_wait import ResourceWatchdog
from verl_cua.integrations.verl.config.checks import validate_cua_config
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.prepare import prepare_config
from verl_cua.integrations.verl.resume.state import check_resume

FORWARDED_ENV = ("VERL_PLATFORM", "VERL_FILE_LOGGER_PATH", "VERL_CUA_IMAGE_CACHE_GIB", "VERL_CUA_IMAGE_PREFETCH")


def checked_config(config: DictConfig) -> dict[str, Any]:
    """Validate `config` as verl's `main` does, plus our `cua.*` keys, estimator settings, budgets and resume
    folder (one-line `CuaConfigError`s); settle what is derived from them; return the resolved config."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from verl_cua.integrations.verl.task_runner import TRAINER_MODE

    validate_cua_config(OmegaConf.to_container(config.cua, resolve=True))
    if config.trainer.v1.trainer_mode != TRAINER_MODE:
        raise CuaConfigError(
            f"trainer.v1.trainer_mode={config.trainer.v1.trainer_mode!r} is not valid; valid: {TRAINER_MODE}"
        )
    prepare_config(config, tuple(ADV_ESTIMATOR_REGISTRY))
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    resolved = OmegaConf.to_container(config, resolve=True)
    check_resume(resolved)
    return resolved


def launch(config: DictConfig) -> None:
    """Train with verl's `run_ppo` and `CuaTaskRunner`, our environment forwarded to every Ray worker and Ray's
    waits for resources bounded by `cua.preflight.resource_timeout`."""
    from verl.trainer.main_ppo import run_ppo

    from verl_cua.integrations.verl.task_runner import CuaTaskRunner

    forward_environment(config)
    with ResourceWatchdog(float(config.cua.preflight.resource_timeout)):
        run_ppo(config, task_runner_class=CuaTaskRunner)


def forward_environment(config: DictConfig) -> None:
    """The V1 trainer needs TransferQueue; our platform and file-logger settings reach every Ray worker (also on a
    cluster started elsewhere, whose workers do not inherit this shell's environment)."""
    with open_dict(config):
        config.transfer_queue.enable = True
        env_vars = {key: os.environ[key] for key in FORWARDED_ENV if os.environ.get(key)}
        if env_vars:
            ray_init = config.ray_kwargs.setdefault("ray_init", {})
            runtime_env = ray_init.get("runtime_env") or {}
            ray_init.runtime_env = OmegaConf.merge({"env_vars": env_vars}, runtime_env)
