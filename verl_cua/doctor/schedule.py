"""The first step's learning rate: verl's own schedule, built as its FSDP engine builds it from the run's
`actor.optim` on a one-parameter optimizer, read at step 0. verl steps the scheduler once per training step, after the
step's updates, so every update of step 1 runs at that rate."""

from __future__ import annotations

from typing import Any

from verl_cua.doctor.finding import Finding

CHECK = "first step"
UNKNOWN_TOTAL = 1000  # total steps where the config leaves them to verl (only a warm-up ratio reads them)
FIX = (
    "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine, min_lr_ratio=1.0, zero_indexed_step=false (warm-up "
    "counted from 1, flat after it: preset=osworld sets them), or lr_warmup_steps=0"
)


def first_step_lr(optim: dict[str, Any], total_steps: int | None) -> tuple[float, int]:
    """(the learning rate of step 1's updates, the warm-up steps) under `optim`, from verl's own scheduler builder
    (`FSDPEngine._build_lr_scheduler`) on a one-parameter optimizer."""
    import dataclasses
    import warnings
    from types import SimpleNamespace

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torchtitan engine is not available" and its siblings
        from verl.workers.config.optimizer import FSDPOptimizerConfig
        from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    names = {f.name for f in dataclasses.fields(FSDPOptimizerConfig)}
    fields = {k: v for k, v in optim.items() if k in names}
    fields["total_training_steps"] = int(optim.get("total_training_steps") or total_steps or UNKNOWN_TOTAL)
    config = FSDPOptimizerConfig(**fields)
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=float(optim["lr"]))
    FSDPEngine._build_lr_scheduler(SimpleNamespace(optimizer_config=config, rank=1), optimizer)  # rank 1: no print
    warmup = config.lr_warmup_steps if config.lr_warmup_steps is not None else -1
    if warmup <= 0:
        warmup = int(config.lr_warmup_steps_ratio * config.total_training_steps)
    return float(optimizer.param_groups[0]["lr"]), warmup


def first_step_finding(config: dict[str, Any]) -> Finding | None:
    """ok with step 1's learning rate, or warn when it is 0 (the first step's updates would change no weight)."""
    optim = (((config.get("actor_rollout_ref") or {}).get("actor") or {}).get("optim")) or {}
    if "lr" not in optim:
        return None
    try:
        lr, warmup = first_step_lr(optim, (config.get("trainer") or {}).get("total_training_steps"))
    except ImportError as exc:
        return Finding("info", CHECK, f"not checked: {exc}")
    except (AssertionError, TypeError, ValueError) as exc:  # a setting verl's own config refuses
        return Finding("warn", CHECK, f"not checked: verl's optimizer config refuses {exc or type(exc).__name__}")
    if lr <= 0:
        return Finding("warn", CHECK, f"lr 0 at step 1 ({warmup} warm-up steps from 0): its updates change no "
                                      f"weight; set {FIX}")  # fmt: skip
    ramp = f", {lr / float(optim['lr']):.3g} of {float(optim['lr']):g} on a {warmup}-step warm-up" if warmup else ""
    return Finding("ok", CHECK, f"lr {lr:.3g} at step 1{ramp}")
