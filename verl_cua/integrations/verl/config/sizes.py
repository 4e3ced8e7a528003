"""verl's sizes and counts that must be positive integers, refused in one line naming the key before Ray starts
(verl itself fails on `data.train_batch_size=-4` with a traceback from inside its config checks, or later in a
worker). The `cua.*` sizes and counts carry their bounds in `config.schema` (`low=1`) and are checked there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_cua.integrations.verl.config.fields import CuaConfigError, describe_bounds

# key -> whether null is valid (verl then derives the value, or the setting is off)
POSITIVE: dict[str, bool] = {
    "data.train_batch_size": False,
    "data.val_batch_size": True,  # null: the whole validation set in one batch
    "data.max_prompt_length": False,
    "data.max_response_length": False,
    "actor_rollout_ref.rollout.n": False,
    "actor_rollout_ref.rollout.val_kwargs.n": False,
    "actor_rollout_ref.rollout.agent.num_workers": False,
    "actor_rollout_ref.actor.ppo_mini_batch_size": False,
    "actor_rollout_ref.actor.ppo_epochs": False,
    "actor_rollout_ref.actor.ppo_micro_batch_size": True,  # the global forms: null when the per-GPU one is set
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": True,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size": True,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": True,
    "actor_rollout_ref.ref.log_prob_micro_batch_size": True,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": True,
    "trainer.total_epochs": False,
    "trainer.total_training_steps": True,  # null: total_epochs decides
    "trainer.n_gpus_per_node": False,
    "trainer.nnodes": False,
}
MISSING = object()


def lookup(config: Mapping[str, Any], key: str) -> Any:
    """The value at dotted `key` of a resolved config, or MISSING where a part of it is absent."""
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def check_sizes(config: Mapping[str, Any]) -> None:
    """Raise `CuaConfigError` naming the first key of `POSITIVE` whose value is not a positive integer (null where
    that is valid; a key the config lacks is not checked)."""
    for key, nullable in POSITIVE.items():
        value = lookup(config, key)
        if value is MISSING or (value is None and nullable):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            null = "; null is also valid" if nullable else ""
            raise CuaConfigError(f"{key} must be {describe_bounds(int, 1, None)}, got {value!r}{null}")
