"""The actor's loss as `CuaTrainer` ships it to the workers (`set_loss_fn`): verl's PPO loss with the SDPO policy
loss and its `is_clip`, or the Entropulse SFT loss (negative log-likelihood of buffered successes' model tokens)."""

from __future__ import annotations

from verl.trainer.ppo.core_algos import agg_loss
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import no_padding_2_padding

from verl_cua.algos.sft import sft_loss

MODES = ("ppo", "sdpo", "sft")


def cua_actor_loss(config, model_output, data, dp_group=None, mode: str = "ppo", is_clip: float | None = 2.0):
    """verl's worker loss signature; `mode` picks PPO (verl's), SDPO (policy loss `sdpo`) or SFT."""
    if mode == "ppo":
        return ppo_loss(config, model_output, data, dp_group)
    if mode == "sdpo":
        from verl_cua.integrations.verl.estimators import sdpo_loss

        if config.policy_loss.get("loss_mode", "vanilla") != "sdpo":
            raise ValueError("cua_actor_loss(mode='sdpo') needs an actor config with policy_loss.loss_mode=sdpo")
        sdpo_loss.IS_CLIP = is_clip
        return ppo_loss(config, model_output, data, dp_group)
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
