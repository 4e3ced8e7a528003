"""The trainer config made ready before Ray starts: verl's sizes and counts checked positive, estimator settings
checked (warnings printed), token budgets checked (one-line errors), the rollout server's context set from the
budget when unset, the attention fallback."""

from __future__ import annotations

import sys

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_cua.integrations.verl.config.budget import SERVED_ROLLOUTS, check_budget, rollout_max_model_len
from verl_cua.integrations.verl.config.checks import estimator_warnings, validate_estimator_config
from verl_cua.integrations.verl.config.sizes import check_sizes
from verl_cua.integrations.verl.fixes.attention import resolve_attention


def prepare_config(config: DictConfig, registered: tuple[str, ...] = ()) -> None:
    """Checks and settings that must hold before Ray starts: sizes and counts, estimator settings, token budgets
    (one-line errors), the rollout server's context (`max_model_len` from the budget when unset), the attention
    fallback."""
    resolved = OmegaConf.to_container(config, resolve=True)
    check_sizes(resolved)
    validate_estimator_config(resolved, registered=registered)
    for warning in estimator_warnings(resolved):
        print(f"verl-cua: WARNING: {warning}", file=sys.stderr)
    check_budget(resolved)
    rollout = config.actor_rollout_ref.rollout
    if rollout.name in SERVED_ROLLOUTS and rollout.get("max_model_len") is None:
        with open_dict(rollout):
            rollout.max_model_len = rollout_max_model_len(resolved)
    resolve_attention(config)
