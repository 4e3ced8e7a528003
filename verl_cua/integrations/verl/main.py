"""`python -m verl_cua.main`: train a GUI agent with verl 0.9.1 (Hydra config `cua_trainer` on verl's ppo_trainer)."""

from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_cua.integrations.verl.attention import resolve_attention
from verl_cua.integrations.verl.budget import check_budget, rollout_max_model_len
from verl_cua.integrations.verl.cua_config import CuaConfigError, validate_cua_config, validate_estimator_config

SERVED_ROLLOUTS = ("vllm", "sglang")


def run(config: DictConfig) -> dict:
    """Validate the config, start Ray (as verl's run_ppo does) and train in `CuaTaskRunner`; returns its summary."""
    import ray
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from verl_cua.integrations.verl.task_runner import CuaTaskRunner

    validate_cua_config(OmegaConf.to_container(config.cua, resolve=True))
    registered = tuple(ADV_ESTIMATOR_REGISTRY)
    prepare_config(config, registered)
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if not ray.is_initialized():
        runtime_env = get_ppo_ray_runtime_env(config)
        runtime_env.setdefault("env_vars", {})["TRANSFER_QUEUE_ENABLE"] = "1"
        for key in ("VERL_PLATFORM", "VERL_FILE_LOGGER_PATH"):
            if os.environ.get(key):
                runtime_env["env_vars"][key] = os.environ[key]
        ray_init = OmegaConf.to_container(config.ray_kwargs.get("ray_init", {}), resolve=True)
        ray_init["runtime_env"] = OmegaConf.to_container(
            OmegaConf.merge(runtime_env, ray_init.get("runtime_env") or {}), resolve=True
        )
        ray.init(**ray_init)
    return ray.get(CuaTaskRunner.remote().run.remote(config))


def prepare_config(config: DictConfig, registered: tuple[str, ...] = ()) -> None:
    """Checks and settings that must hold before Ray starts: estimator settings, token budgets (one-line errors),
    the rollout server's context (`max_model_len` from the budget when unset), the attention fallback."""
    resolved = OmegaConf.to_container(config, resolve=True)
    validate_estimator_config(resolved, registered=registered)
    check_budget(resolved)
    rollout = config.actor_rollout_ref.rollout
    if rollout.name in SERVED_ROLLOUTS and rollout.get("max_model_len") is None:
        with open_dict(rollout):
            rollout.max_model_len = rollout_max_model_len(resolved)
    resolve_attention(config)


@hydra.main(config_path="config", config_name="cua_trainer", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point."""
    try:
        run(config)
    except CuaConfigError as exc:
        print(f"verl-cua: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
