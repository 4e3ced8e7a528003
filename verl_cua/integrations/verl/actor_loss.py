"""The actor's loss as `CuaTrainer` ships it to the workers (`set_loss_fn`): verl's PPO loss plus the terms of the
plan's hooks (CoSo's weighted entropy bonus when `cua.coso.enable`, `verl_cua.integrations.verl.coso.loss`), the
SDPO loss (token- or logit-level, `verl_cua.integrations.verl.sdpo.loss`), or the Entropulse SFT loss (negative
log-likelihood of buffered successes' model tokens). It travels with the run's `EstimatorPlan` and typed `cua`
config (frozen dataclasses: they pickle to the workers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl.trainer.ppo.core_algos import agg_loss
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import no_padding_2_padding

from verl_cua.algos.sft import sft_loss

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import CuaConfig
    from verl_cua.integrations.verl.estimator_plan import EstimatorPlan

MODES = ("ppo", "sdpo", "sft")


def cua_actor_loss(
    config,
    model_output=None,
    data=None,
    dp_group=None,
    student_logits=None,
    mode: str = "ppo",
    plan: EstimatorPlan | None = None,
    cua: CuaConfig | None = None,
):
    """verl's worker loss signature; `mode` picks PPO (verl's, plus the loss term of each of `plan.hooks` with its
    `cua` section: CoSo's bonus), SDPO (the loss `plan.sdpo_loss` with `cua.sdpo`) or SFT.

    verl also calls the loss as its logits processor (`student_logits` given) in passes that ask for top-k outputs;
    only the SDPO loss takes part in those."""
    if mode == "sdpo":
        from verl_cua.integrations.verl.sdpo.loss import sdpo_actor_loss

        if plan is None or cua is None:
            raise ValueError("the 'sdpo' actor loss needs the run's plan and its cua config")
        return sdpo_actor_loss(config, model_output, data, plan, cua.sdpo, student_logits=student_logits)
    if student_logits is not None:
        raise ValueError(f"the {mode!r} actor loss has no logits-processor pass (cua.sdpo passes need mode='sdpo')")
    if mode == "ppo":
        loss, metrics = ppo_loss(config, model_output, data, dp_group)
        for hook in plan.hooks if plan is not None else ():
            loss = hook.add_loss_term(hook.settings(cua), config, model_output, data, loss, metrics)
        return loss, metrics
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
