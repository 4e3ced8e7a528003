"""`python -m verl_cua.main`: train a GUI agent with verl 0.9.1 (Hydra config `cua_trainer` on verl's ppo_trainer)."""

from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_cua.doctor.gpus import SERVED_ROLLOUTS
from verl_cua.doctor.preflight import PreflightError, check_preflight
from verl_cua.integrations.ray_wait import ResourceWaitError, ResourceWatchdog
from verl_cua.integrations.verl.config.budget import check_budget, rollout_max_model_len
from verl_cua.integrations.verl.config.checks import estimator_warnings, validate_cua_config, validate_estimator_config
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.fixes.attention import resolve_attention
from verl_cua.integrations.verl.resume.state import check_resume

FORWARDED_ENV = ("VERL_PLATFORM", "VERL_FILE_LOGGER_PATH", "VERL_CUA_IMAGE_CACHE_GIB", "VERL_CUA_IMAGE_PREFETCH")


def run(config: DictConfig) -> None:
    """Validate the config as verl's `main` does, plus our own checks and the machine's preflight (before Ray
    starts), then train with verl's `run_ppo` and `CuaTaskRunner` (so verl's launch settings hold:
    `rollout.full_determinism`, nsys profiling, Ray timelines), Ray's waits for resources bounded."""
    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from verl_cua.integrations.verl.task_runner import TRAINER_MODE, CuaTaskRunner

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
    check_preflight(resolved)  # the machine, once the config itself holds
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


def prepare_config(config: DictConfig, registered: tuple[str, ...] = ()) -> None:
    """Checks and settings that must hold before Ray starts: estimator settings, token budgets (one-line errors),
    the rollout server's context (`max_model_len` from the budget when unset), the attention fallback."""
    resolved = OmegaConf.to_container(config, resolve=True)
    validate_estimator_config(resolved, registered=registered)
    for warning in estimator_warnings(resolved):
        print(f"verl-cua: WARNING: {warning}", file=sys.stderr)
    check_budget(resolved)
    rollout = config.actor_rollout_ref.rollout
    if rollout.name in SERVED_ROLLOUTS and rollout.get("max_model_len") is None:
        with open_dict(rollout):
            rollout.max_model_len = rollout_max_model_len(resolved)
    resolve_attention(config)


def run_or_exit(config: DictConfig, prog: str = "verl-cua") -> None:
    """`run`, with a bad `cua.*` or trainer setting reported in one line (exit 2), and a machine that cannot run
    it (the preflight's blockers, a line each) or a Ray wait past its bound in one line (exit 1), not a traceback."""
    try:
        run(config)
    except CuaConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        sys.exit(2)
    except PreflightError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    except ResourceWaitError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        sys.exit(1)


@hydra.main(config_path="config", config_name="cua_trainer", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point."""
    run_or_exit(config)


if __name__ == "__main__":
    main()
