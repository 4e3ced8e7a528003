"""CoSo's term of the actor loss on verl's workers: verl's PPO loss minus coef * agg(B * H), the entropy bonus on the
model tokens weighted by their causal weights (the row field `WEIGHT`), with its `coso/*` metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl.trainer.ppo.core_algos import agg_loss
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.padding import no_padding_2_padding

from verl_cua.algos.coso import coso_metrics, weighted_entropy
from verl_cua.integrations.verl.coso import WEIGHT

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import CosoConfig


def entropy_bonus(config, model_output, data, coso: CosoConfig, loss, metrics: dict):
    """PPO's `loss` (verl's `ppo_loss`, which filled the config's global_batch_info) minus coef * agg(B * H):
    CoSo's entropy bonus on the model tokens, aggregated as the PPO loss is (`loss_agg_mode` over the global
    mini-batch); `metrics` gain `coso/*`. H needs the forward's entropy (the trainer sets `actor.calculate_entropy`;
    `entropy_coeff` stays verl's own unweighted term, 0 by default)."""
    entropy = model_output.get("entropy", None)
    if entropy is None:
        raise ValueError("cua.coso needs the actor's per-token entropy: set actor_rollout_ref.actor.calculate_entropy")
    entropy = no_padding_2_padding(entropy, data)
    batch = data.select("response_mask", WEIGHT).to_padded_tensor()
    mask = batch["response_mask"].bool()
    weights = batch[WEIGHT].to(entropy.device)
    term = weighted_entropy(entropy, weights, mask)
    bonus = agg_loss(loss_mat=term, loss_mask=mask, loss_agg_mode=config.loss_agg_mode, **config.global_batch_info)
    aggregation = metrics["actor/pg_loss"].aggregation  # SUM over micro-batches when verl normalises globally
    metrics["coso/bonus"] = Metric(value=bonus.detach(), aggregation=aggregation)
    for key, value in coso_metrics(entropy, weights, mask).items():
        metrics[key] = Metric(value=value, aggregation=AggregationType.MEAN)
    return loss - coso.coef * bonus
