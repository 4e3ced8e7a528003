"""SDPO's cost per training step against GRPO's, in one run: `python -m bench.sdpo [--steps N] [--family F]`.

GRPO, logit-level SDPO (the default) and token-level SDPO train the same tiny warm-started Qwen-VL on the same
MiniWoB++ rows with the same config and seeds, through `python -m verl_cua.main preset=cpu` (real hf rollout, real
Chromium, FSDP2 on CPU). The first step is a warm-up for all (compilation, caches); the figure is the median of the
remaining `timing_s/step`, and the ratio to GRPO's, GRPO's run being the anchor. Sampling differs between the runs,
so the same-batch figure comes from each SDPO run itself: SDPO adds to a GRPO step the teacher pass (for the logit
loss also the student's top-k pass) and, in the update, the logit loss's extra work per token, so
`ratio_same_batch` = step / (step - teacher pass - (update ms/token - GRPO's update ms/token) x tokens) on each SDPO
step. Memory: `topk_fields_mb`, the host memory the logit loss adds (k ids and k teacher log-probs per response
token; the processor never stores [B, L, V]). Generation dominates a step on CPU. Target: <= 1.3x.

Measured (`python -m bench.sdpo`, tiny Qwen2.5-VL, 2-core CPU, with a `bench.learn` run sharing the cores): GRPO
11.17 s a step; logit-level SDPO 13.18 s (1.18x; same batch 1.29x; teacher + student top-k passes 2.91 s; 0.74 MB
of top-k fields for 8 rows); token-level SDPO 11.82 s (1.06x; same batch 1.14x; teacher pass 0.98 s). The top-k
fields cost 800 bytes per response token (k = 100 ids and log-probs, float32).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bench.requires import require
from bench.short_runs import median_after_warmup, train_variant

TARGET = 1.3
VARIANTS = {"grpo": ("algorithm.adv_estimator=grpo",), "sdpo_logit": ("algorithm.adv_estimator=sdpo",),
            "sdpo_token": ("algorithm.adv_estimator=sdpo", "cua.sdpo.loss=token")}  # fmt: skip
# the metrics the report reads of each step (a missing one reads as 0: the e2e SDPO test checks a real run has them)
READS = ("timing_s/step", "timing_per_token_ms/update_actor", "perf/total_num_tokens", "timing_s/sdpo_teacher",
         "sdpo/reprompt_fraction", "sdpo/topk_fields_mb")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Train grpo then sdpo on the same rows; print the per-step medians and the ratio as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4, help="training steps per estimator (the first is a warm-up)")
    ap.add_argument("--family", default="qwen25vl", choices=("qwen25vl", "qwen3vl"))
    ap.add_argument("--tasks", default="click-test,click-button")
    args = ap.parse_args(argv)
    require("bench.sdpo", ("torch", "verl", "miniwob"))

    from verl_cua.integrations.verl import dataset
    from verl_cua.testing.tiny_models import build_tiny_model
    from verl_cua.testing.warm_start import warm_start

    model = str(warm_start(build_tiny_model(args.family)))
    with tempfile.TemporaryDirectory(prefix="bench-sdpo-") as tmp:
        workdir = Path(tmp)
        data = workdir / "train.parquet"
        dataset.main(["--env", "miniwob", "--tasks", args.tasks, "--seeds", "0", "--out", str(data)])
        runs = {n: train_variant("bench.sdpo", workdir, model, data, n, VARIANTS[n], args.steps) for n in VARIANTS}
    print(json.dumps(report(runs, args.family, args.steps), indent=2))
    return 0


def report(runs: Mapping[str, list[dict]], family: str, steps: int) -> dict:
    """Each SDPO variant's per-step medians (after the warm-up step) against GRPO's, from the `steps` metric rows of
    each variant's run (`VARIANTS`)."""
    grpo = median_after_warmup(runs["grpo"], "timing_s/step")
    grpo_update = median_after_warmup(runs["grpo"], "timing_per_token_ms/update_actor")
    out = {"family": family, "steps_measured": max(1, steps - 1), "grpo_step_s": round(grpo, 3)}
    for name in ("sdpo_logit", "sdpo_token"):
        rows = runs[name]
        step = median_after_warmup(rows, "timing_s/step")

        def extra(r):
            update = (r.get("timing_per_token_ms/update_actor", grpo_update) - grpo_update) / 1000
            return r.get("timing_s/sdpo_teacher", 0.0) + max(0.0, update) * r.get("perf/total_num_tokens", 0)

        same_batch = [r["timing_s/step"] / (r["timing_s/step"] - extra(r)) for r in rows]
        out[name] = {
            "step_s": round(step, 3),
            "ratio_to_grpo": round(step / grpo, 3) if grpo else None,
            "ratio_same_batch": round(statistics.median(same_batch[1:] or same_batch), 3),
            "teacher_pass_s": round(median_after_warmup(rows, "timing_s/sdpo_teacher"), 3),
            "update_ms_per_token": round(median_after_warmup(rows, "timing_per_token_ms/update_actor"), 3),
            "reprompt_fraction": round(median_after_warmup(rows, "sdpo/reprompt_fraction"), 3),
            "topk_fields_mb": round(median_after_warmup(rows, "sdpo/topk_fields_mb"), 3),
        }
    out["grpo_update_ms_per_token"] = round(grpo_update, 3)
    out["target_ratio"] = TARGET
    out["anchor"] = "grpo, same rows, same config, same run"
    return out


if __name__ == "__main__":
    sys.exit(main())
