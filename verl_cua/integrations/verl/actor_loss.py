"""The actor's loss as `CuaTrainer` ships it to the workers (`set_loss_fn`): verl's PPO loss (with CoSo's weighted
entropy bonus when `cua.coso.enable`), the SDPO loss (token- or logit-level, `verl_cua.integrations.verl.sdpo.loss`),
or the Entropulse SFT loss (negative log-likelihood of buffered successes' model tokens)."""

from __future__ import annotations

from verl.trainer.ppo.core_algos import agg_loss
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import no_padding_2_padding

from verl_cua.algos.coso import coso_metrics, weighted_entropy
from verl_cua.algos.sft import sft_loss

MODES = ("ppo", "sdpo", "sft")
COSO_WEIGHT = "cua_coso_weight"  # per row [response_len]: CoSo's causal weight B of each model token (0 elsewhere)


def cua_actor_loss(
    config, model_output=None, data=None, dp_group=None, student_logits=None, mode: str = "ppo", sdpo=None, coso=None
):
    """verl's worker loss signature; `mode` picks PPO (verl's; `coso`: the `cua.coso` settings add CoSo's bonus),
    SDPO (`sdpo`: the `cua.sdpo` settings) or SFT.

    verl also calls the loss as its logits processor (`student_logits` given) in passes that ask for top-k outputs;
    only the SDPO loss takes part in those."""
    if mode == "sdpo":
        from verl_cua.integrations.verl.sdpo.loss import sdpo_actor_loss

        return sdpo_actor_loss(config, model_output, data, dict(sdpo or {}), student_logits=student_logits)
    if student_logits is not None:
        raise ValueError(f"the {mode!r} actor loss has no logits-processor pass (cua.sdpo passes need mode='sdpo')")
    if mode == "ppo":
        if coso is None:
            return ppo_loss(config, model_output, data, dp_group)
        return _ppo_coso(config, model_output, data, dp_group, float(dict(coso)["coef"]))
    if mode == "sft":
        return _sft(config, model_output, data)
    raise ValueError(f"unknown actor loss mode {mode!r}; valid: {', '.join(MODES)}")


def _sft(config, model_output, data):
    log_prob = no_padding_2_padding(model_output["log_probs"], data)
    info = {
        "dp_size": data["dp_size"],
        "batch_num_tokens": data["batch_num_tokens"],
        "global_batch_size": data["global_batch_size"],
        "loss_scale_factor": config.loss_scale_factor,
    }
    mask = data.select("response_mask").to_padded_tensor()["response_mask"].to(bool)
    loss = agg_loss(loss_mat=sft_loss(log_prob, mask), loss_mask=mask, loss_agg_mode=config.loss_agg_mode, **info)
    global_info = info["dp_size"] > 1 or any(info[k] is not None for k in info if k != "dp_size")
    aggregation = AggregationType.SUM if global_info else AggregationType.MEAN
    return loss, {"actor/sft_loss": Metric(value=loss, aggregation=aggregation)}


def _ppo_coso(config, model_output, data, dp_group, coef: float):
    """verl's PPO loss minus coef * agg(B * H): CoSo's entropy bonus on the model tokens, aggregated as the PPO loss
    is (`loss_agg_mode` over the global mini-batch). H needs the forward's entropy (the trainer sets
    `actor.calculate_entropy`; `entropy_coeff` stays verl's own unweighted term, 0 by default)."""
    entropy = model_output.get("entropy", None)
    if entropy is None:
        raise ValueError("cua.coso needs the actor's per-token entropy: set actor_rollout_ref.actor.calculate_entropy")
    loss, metrics = ppo_loss(config, model_output, data, dp_group)  # fills config.global_batch_info
    entropy = no_padding_2_padding(entropy, data)
    batch = data.select("response_mask", COSO_WEIGHT).to_padded_tensor()
    mask = batch["response_mask"].bool()
    weights = batch[COSO_WEIGHT].to(entropy.device)
    term = weighted_entropy(entropy, weights, mask)
    bonus = agg_loss(loss_mat=term, loss_mask=mask, loss_agg_mode=config.loss_agg_mode, **config.global_batch_info)
    loss = loss - coef * bonus
    aggregation = metrics["actor/pg_loss"].aggregation  # SUM over micro-batches when verl normalises globally
    metrics["coso/bonus"] = Metric(value=bonus.detach(), aggregation=aggregation)
    for key, value in coso_metrics(entropy, weights, mask).items():
        metrics[key] = Metric(value=value, aggregation=AggregationType.MEAN)
    return loss, metrics
