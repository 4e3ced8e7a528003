"""verl's V1 agent-loop worker and manager with compact screenshots: rows go to TransferQueue with their images as
PNG bytes (`cua.env.image_storage=png`, the default) instead of fp32 `pixel_values` (see `compact_images`)."""

from __future__ import annotations

from typing import Any

import ray
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ

from verl_cua.integrations.verl.compact_images import compact
from verl_cua.integrations.verl.cua_schema import CuaConfig

# Ray refuses to subclass an actor class; its undecorated class can be.
_WorkerBase = AgentLoopWorkerTQ.__ray_metadata__.modified_class


class CuaAgentLoopWorker(_WorkerBase):
    """`AgentLoopWorkerTQ` whose rows carry PNG screenshots; every other field is verl's own."""

    def _compute_multi_modal_inputs(self, output, input_ids) -> dict[str, Any]:
        """verl's processor output (grid, lengths, M-RoPE inputs) with `pixel_values` swapped for the PNGs."""
        inputs = super()._compute_multi_modal_inputs(output, input_ids)
        images = (output.multi_modal_data or {}).get("images")
        if images and "pixel_values" in inputs and image_storage(self.config) == "png":
            return compact(inputs, images)
        return inputs


def image_storage(config: Any) -> str:
    """`cua.env.image_storage` of a trainer config (its default, png, when the config has no `cua`)."""
    return CuaConfig.from_mapping(config.get("cua")).env.image_storage


class CuaAgentLoopManager(AgentLoopManagerTQ):
    """`AgentLoopManagerTQ` starting `CuaAgentLoopWorker`s."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = ray.remote(CuaAgentLoopWorker)  # AgentLoopManagerTQ sets its own first
