"""`CuaTaskRunner`: verl's `TaskRunnerV1` with verl-cua's trainer and agent-loop manager plugged in; everything else
(TransferQueue, the config print, the logger's finish) is upstream's `run`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import ray
from omegaconf import DictConfig
from verl.trainer.main_ppo import TaskRunnerV1

# Ray refuses to subclass an actor class; its undecorated class can be.
_RunnerBase = TaskRunnerV1.__ray_metadata__.modified_class
TRAINER_MODE = "sync"
AGENT_LOOP_MANAGER = "verl_cua.integrations.verl.agent_loop_worker.CuaAgentLoopManager"


@contextmanager
def trainer_for_mode(mode: str, trainer_cls: type) -> Iterator[None]:
    """Let verl's `get_trainer_cls(mode)` return `trainer_cls` inside the block (this Ray actor's process only)."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

    upstream = TRAINER_REGISTRY.get(mode)
    TRAINER_REGISTRY[mode] = trainer_cls
    try:
        yield
    finally:
        if upstream is None:
            TRAINER_REGISTRY.pop(mode, None)
        else:
            TRAINER_REGISTRY[mode] = upstream


@ray.remote(num_cpus=1)
class CuaTaskRunner(_RunnerBase):
    """Runs the whole training job inside the Ray cluster: verl's runner, training `CuaTrainer`."""

    def run(self, config: DictConfig) -> None:
        """verl's `TaskRunnerV1.run` with `CuaTrainer` as the sync trainer and our agent-loop manager by default."""
        from omegaconf import open_dict

        from verl_cua.integrations.verl.trainer import CuaTrainer

        agent = config.actor_rollout_ref.rollout.agent
        if not agent.get("agent_loop_manager_class"):
            with open_dict(agent):
                agent.agent_loop_manager_class = AGENT_LOOP_MANAGER
        with trainer_for_mode(TRAINER_MODE, CuaTrainer):
            super().run(config)
