"""`CuaTaskRunner`: the Ray actor that builds `CuaTrainer` and the agent-loop manager and runs training
(our own version of verl's TaskRunnerV1.run, which is a Ray actor and cannot be subclassed)."""

from __future__ import annotations

import ray
from omegaconf import DictConfig, OmegaConf


@ray.remote(num_cpus=1)
class CuaTaskRunner:
    """Runs the whole training job inside the Ray cluster."""

    def run(self, config: DictConfig) -> dict:
        """Train; returns the trainer's final metrics and totals (for the quickstart summary)."""
        import transfer_queue as tq
        from verl.utils.import_utils import load_class_from_fqn
        from verl.utils.logging_utils import configure_verl_logging

        from verl_cua.integrations.verl.agent_loop_worker import CuaAgentLoopManager
        from verl_cua.integrations.verl.trainer import CuaTrainer

        configure_verl_logging()
        config.transfer_queue.enable = True
        OmegaConf.resolve(config)
        tq.init(config.transfer_queue)
        trainer = None
        succeeded = False
        try:
            trainer = CuaTrainer(config=config)
            trainer.init()
            manager_fqn = config.actor_rollout_ref.rollout.get("agent", {}).get("agent_loop_manager_class")
            manager_cls = load_class_from_fqn(manager_fqn, "AgentLoopManager") if manager_fqn else CuaAgentLoopManager
            manager = manager_cls.create(
                config=config,
                llm_client=trainer.get_llm_client(),
                teacher_client=trainer.get_teacher_client(),
                reward_loop_worker_handles=trainer.get_reward_handles(),
            )
            trainer.fit(manager)
            succeeded = True
            return {"totals": dict(trainer.cua_totals), "global_steps": int(getattr(trainer, "global_steps", 0))}
        finally:
            try:
                tracking = getattr(trainer, "logger", None)
                if tracking is not None:
                    tracking.finish(exit_code=0 if succeeded else 1)
            finally:
                tq.close()
