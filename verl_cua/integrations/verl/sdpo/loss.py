"""The SDPO actor loss on verl's workers: the token-level term -w * A * log pi or the logit-level divergence,
times the truncated importance weight w (and verl's rollout-correction weights), averaged over the tokens of
`loss_mask` in the global mini-batch, plus verl's KL-to-reference and entropy terms when they are configured."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from verl.trainer.ppo.core_algos import agg_loss, kl_penalty
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.padding import no_padding_2_padding

from verl_cua.algos.sdpo import sdpo_policy_loss, truncated_is_weight
from verl_cua.integrations.verl.sdpo import MASK, logit

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import SdpoConfig
    from verl_cua.integrations.verl.estimator_plan import EstimatorPlan


def sdpo_actor_loss(config, model_output, data, plan: EstimatorPlan, sdpo: SdpoConfig, student_logits=None):
    """verl's worker loss for SDPO (the loss `plan.sdpo_loss`, the typed `cua.sdpo` settings); called first as the
    logits processor (student_logits given), then as the loss."""
    if student_logits is not None:
        return logit.logits_processor(student_logits, data, sdpo.topk, sdpo.alpha, sdpo.add_tail)
    from verl.utils import tensordict_utils as tu

    if tu.get_non_tensor_data(data=data, key=logit.PASS, default="train") != "train":
        return torch.zeros((), device=data["response_mask"].values().device), {}  # a top-k pass: nothing to train
    log_prob = no_padding_2_padding(model_output["log_probs"], data)
    fields = ["response_mask", "loss_mask", "old_log_probs", "advantages", MASK]
    fields += [f for f in ("rollout_is_weights", "ref_log_prob") if f in data]
    batch = data.select(*fields).to_padded_tensor()
    response_mask = batch["response_mask"].bool()
    loss_mask = batch["loss_mask"].bool() & response_mask
    sd_mask = batch[MASK].bool() & response_mask
    info = {
        "dp_size": data["dp_size"],
        "batch_num_tokens": data["batch_num_tokens"],
        "global_batch_size": data["global_batch_size"],
        "loss_scale_factor": config.loss_scale_factor,
    }
    rollout_is = batch.get("rollout_is_weights", None)
    is_clip = sdpo.is_clip
    if plan.logit_loss:
        divergence = no_padding_2_padding(model_output[logit.LOSS], data).float()
        weight = truncated_is_weight(log_prob, batch["old_log_probs"], is_clip)
        if rollout_is is not None:
            weight = weight * rollout_is.detach()
        per_token = weight * divergence
        metrics = {"sdpo/divergence": _mean(divergence, sd_mask), "sdpo/is_weight_mean": _mean(weight, sd_mask)}
    else:
        per_token, metrics = sdpo_policy_loss(
            log_prob, batch["old_log_probs"], batch["advantages"], sd_mask, is_clip, rollout_is_weights=rollout_is
        )
    mode = config.loss_agg_mode
    loss = agg_loss(loss_mat=per_token, loss_mask=sd_mask, loss_agg_mode=mode, **info)
    out = {"actor/pg_loss": loss.detach()}
    entropy = model_output.get("entropy", None)
    if entropy is not None and config.entropy_coeff:
        entropy_loss = agg_loss(no_padding_2_padding(entropy, data), loss_mask, mode, **info)
        loss = loss - config.entropy_coeff * entropy_loss
        out["actor/entropy_loss"] = entropy_loss.detach()
    if config.use_kl_loss:
        kld = kl_penalty(logprob=log_prob, ref_logprob=batch["ref_log_prob"], kl_penalty=config.kl_loss_type)
        kl_loss = agg_loss(kld, loss_mask, mode, **info)
        loss = loss + config.kl_loss_coef * kl_loss
        out["actor/kl_loss"], out["actor/kl_coef"] = kl_loss.detach(), config.kl_loss_coef
    coef = out.pop("actor/kl_coef", None)
    metrics = {k: Metric(value=v, aggregation=AggregationType.MEAN) for k, v in metrics.items() if v is not None}
    metrics.update({k: Metric(value=v, aggregation=AggregationType.SUM) for k, v in out.items()})
    if coef is not None:
        metrics["actor/kl_coef"] = Metric(value=coef, aggregation=AggregationType.MEAN)
    return loss, metrics


def _mean(values: torch.Tensor, mask: torch.Tensor) -> float | None:
    """Mean of values over mask (None when the mask is empty: the micro-batch reports nothing)."""
    n = int(mask.sum())
    return float((values.detach().float() * mask).sum() / n) if n else None
