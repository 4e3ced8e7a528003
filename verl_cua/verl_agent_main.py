"""`python -m verl_cua.verl_agent_main <overrides>`: verl-agent's `main_ppo` with verl-cua installed.

The same Hydra config and overrides as `python3 -m verl.trainer.main_ppo` (run from the verl-agent checkout).
Before Ray starts it checks the estimator, our env section and the machine (the preflight: GPUs, model, stack);
then it swaps in a TaskRunner actor that calls `install()` first, since make_envs, the trainer and
compute_advantage all run in that actor, not here. Ray's waits for resources are bounded as in our trainer; Ctrl-C
is one line naming the last saved checkpoint (exit 130), as in our trainer.
An entry point, beside `verl_cua.main` (verl's) and above every layer: it may import the doctor's preflight.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from verl_cua.exits import guarded
from verl_cua.integrations.verl_agent.install import NOT_FOUND, builtin_estimators, install
from verl_cua.main import check_overrides, exit_interrupted

OUR_SECTIONS = ("preflight",)  # the `cua.*` keys this host reads: +cua.preflight.resource_timeout and .skip


def check_config(config: Any) -> None:
    """One-line errors, before any env or GPU is touched: unknown estimator, bad `env.<ours>` section."""
    import verl.trainer.ppo.ray_trainer as ray_trainer

    from verl_cua.integrations.verl_agent.estimators import check_estimator
    from verl_cua.integrations.verl_agent.settings import env_name, read_settings

    check_estimator(str(config.algorithm.adv_estimator), builtin_estimators(ray_trainer))
    name = env_name(config.env.env_name)
    if name is not None:
        read_settings(name, config.env.get(name))


def resource_timeout(config: dict[str, Any]) -> float:
    """The bound on Ray's waits for resources: `+cua.preflight.resource_timeout=S` (verl-agent's config has no `cua`
    section of its own; the preflight reads nothing else of such a section there), else our trainer's default."""
    from verl_cua.integrations.ray_wait import DEFAULT_RESOURCE_TIMEOUT

    preflight = (config.get("cua") or {}).get("preflight") or {}
    return float(preflight.get("resource_timeout", DEFAULT_RESOURCE_TIMEOUT))


def task_runner(original: Any) -> Any:
    """A Ray actor class like verl-agent's `TaskRunner` whose `run` installs verl-cua before delegating."""
    import ray

    @ray.remote(num_cpus=1)
    class CuaTaskRunner:
        def run(self, config):
            install()
            return original.__ray_actor_class__.run(self, config)

    return CuaTaskRunner


def main(argv: list[str] | None = None) -> None:
    """Parse verl-agent's Hydra config with our checks and run its PPO loop."""
    try:
        import hydra
        import verl.trainer.main_ppo as main_ppo
    except ImportError as exc:
        raise SystemExit(f"verl-cua: {NOT_FOUND} ({exc})") from None
    install()  # driver-side too: cheap, and it fails here rather than in the actor if verl-agent is not found
    config_dir = os.path.join(os.path.dirname(main_ppo.__file__), "config")

    @hydra.main(config_path=config_dir, config_name="ppo_trainer", version_base=None)
    def run(config) -> None:
        from omegaconf import OmegaConf

        from verl_cua.doctor.preflight import PreflightError, check_preflight
        from verl_cua.integrations.ray_wait import ResourceWaitError, ResourceWatchdog

        try:
            check_config(config)
            resolved = OmegaConf.to_container(config, resolve=True)
            check_preflight(resolved, host="verl-agent")
        except ValueError as exc:
            raise SystemExit(f"verl-cua: {exc}") from None
        except PreflightError as exc:
            raise SystemExit(str(exc)) from None
        main_ppo.TaskRunner = task_runner(main_ppo.TaskRunner)
        try:
            with ResourceWatchdog(resource_timeout(resolved)):
                main_ppo.run_ppo(config)
        except ResourceWaitError as exc:
            raise SystemExit(f"verl-cua: {exc}") from None
        except KeyboardInterrupt:
            exit_interrupted(config)

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    check_overrides(sys.argv[1:], sections=OUR_SECTIONS)
    status = guarded(run, lambda: "verl-cua: stopped by Ctrl-C before training started; nothing kept; rerun the same "
                                  "command to start again")  # fmt: skip
    if status:
        sys.exit(status)


if __name__ == "__main__":
    main()
