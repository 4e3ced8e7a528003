"""`install()`: hook our envs and estimators into verl-agent in this process (call it in the TaskRunner actor).

On a checkout with our patches (patches/verl-agent/) it registers in the registries they add; on an unpatched
one it wraps `make_envs`, `compute_advantage` and the trainer's critic check, handing every other env and
estimator to verl-agent's own code. Calling it twice changes nothing.
"""

from __future__ import annotations

import functools
from typing import Any

from verl_cua.envs import ENV_REGISTRY
from verl_cua.integrations.verl_agent.estimators import ESTIMATORS
from verl_cua.integrations.verl_agent.make_envs import make_gui_envs
from verl_cua.integrations.verl_agent.settings import env_name

MARK = "__verl_cua__"
NOT_FOUND = (
    "verl-agent is not importable: install its checkout with `pip install -e .` at the commit in "
    "patches/verl-agent/UPSTREAM and run from its root (see recipes/verl_agent/)"
)


def install() -> dict[str, str]:
    """Route `env.env_name=osworld|miniwob` and `algorithm.adv_estimator=cua_gigpo` to verl-cua; returns how each
    hook went in (`registry` or `wrapped`)."""
    try:
        import agent_system.environments as environments
        import agent_system.environments.env_manager as env_manager
        import verl.trainer.ppo.ray_trainer as ray_trainer
    except ImportError as exc:
        raise ImportError(f"{NOT_FOUND} ({exc})") from None
    if not hasattr(env_manager, "EnvironmentManagerBase") or not hasattr(ray_trainer, "AdvantageEstimator"):
        raise ImportError(f"{NOT_FOUND} (found `verl` {getattr(ray_trainer, '__file__', '?')} without verl-agent)")
    return {"envs": _install_envs(environments, env_manager), "estimators": _install_estimators(ray_trainer)}


def builtin_estimators(ray_trainer: Any) -> list[str]:
    """verl-agent's own `AdvantageEstimator` names."""
    return [e.value for e in ray_trainer.AdvantageEstimator]


def _install_envs(environments: Any, env_manager: Any) -> str:
    if hasattr(env_manager, "register_env"):  # patches/verl-agent/0001-env-registry.patch
        for name in ENV_REGISTRY.valid():
            env_manager.register_env(name)(make_gui_envs)
        return "registry"
    original = env_manager.make_envs
    if getattr(original, MARK, False):
        return "wrapped"

    @functools.wraps(original)
    def make_envs(config):
        if env_name(config.env.env_name) is not None:
            return make_gui_envs(config)
        return original(config)

    setattr(make_envs, MARK, True)
    env_manager.make_envs = environments.make_envs = make_envs
    return "wrapped"


def _install_estimators(ray_trainer: Any) -> str:
    if hasattr(ray_trainer, "register_adv_est"):  # patches/verl-agent/0002-adv-estimator-registry.patch
        for name, fn in ESTIMATORS.items():
            if name not in ray_trainer.ADV_ESTIMATOR_REGISTRY:
                ray_trainer.register_adv_est(name, needs_critic=fn.needs_critic)(fn)
        return "registry"
    original = ray_trainer.compute_advantage
    if getattr(original, MARK, False):
        return "wrapped"

    @functools.wraps(original)
    def compute_advantage(data, adv_estimator, *args, **kwargs):
        fn = ESTIMATORS.get(getattr(adv_estimator, "value", adv_estimator))
        if fn is None:
            return original(data, adv_estimator, *args, **kwargs)
        names = ("gamma", "lam", "num_repeat", "multi_turn", "norm_adv_by_std_in_grpo")
        return fn(data, **dict(zip(names, args, strict=False)), **kwargs)

    setattr(compute_advantage, MARK, True)
    ray_trainer.compute_advantage = compute_advantage
    _wrap_critic_check(ray_trainer)
    return "wrapped"


def _wrap_critic_check(ray_trainer: Any) -> None:
    """`RayPPOTrainer.__init__` raises NotImplementedError for estimators it does not list: let ours through as
    `grpo` (no critic) for the check, then restore the name."""
    trainer_cls = ray_trainer.RayPPOTrainer
    original = trainer_cls.__init__
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def __init__(self, config, *args, **kwargs):
        name = config.algorithm.adv_estimator
        if name not in ESTIMATORS:
            return original(self, config, *args, **kwargs)
        from omegaconf import open_dict

        with open_dict(config):
            config.algorithm.adv_estimator = "grpo"
        try:
            original(self, config, *args, **kwargs)
        finally:
            with open_dict(config):
                config.algorithm.adv_estimator = name
        self.use_critic = ESTIMATORS[name].needs_critic

    setattr(__init__, MARK, True)
    trainer_cls.__init__ = __init__
