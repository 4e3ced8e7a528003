"""CoSo's cost per training step against GRPO's, in one run: `python -m bench.coso [--steps N] [--family F]`.

GRPO and GRPO + CoSo (`cua.coso.enable=true`) train the same tiny warm-started Qwen-VL on the same MiniWoB++ rows with
the same config and seeds, through `python -m verl_cua.main preset=cpu` (real hf rollout, real Chromium, FSDP2 on
CPU); GRPO's run is the anchor. The first step is a warm-up for both; each figure is the median of the remaining
steps. CoSo adds two costs: the causal weights (one `parse_action` per response token and per-token prefix decodes,
in the agent-loop workers: `coso/weight_s`, summed over a step's rows, and per model token) and, in the actor update,
the per-token entropy over the vocabulary with its backward (`timing_per_token_ms/update_actor` against GRPO's).
Sampling differs between the runs, so the same-batch ratio comes from the CoSo run itself: step / (step - weight
seconds - (update ms/token - GRPO's) x tokens). Memory: the entropy's softmax is [tokens, vocab] float32 more per
micro-batch in the update's forward (verl's `entropy_from_logits`; `entropy_checkpointing` trades it for compute);
`entropy_mb_per_token` is 4 x vocab bytes.

Measured (`python -m bench.coso --steps 4 --model <the warm-started tiny Qwen2.5-VL>`, 2-core CPU shared with a
`bench.learn` run): GRPO 3.18 s a step, update 0.220 ms a token; CoSo 2.87 s (0.90x; same batch 1.02x), update 0.234
ms a token (1.06x), weights 9.3 ms a step (0.074 ms a model token, 0.3% of the step), causal fraction 0.34; entropy
0.011 MB a token on the tiny model's 3,008-token vocabulary (0.58 MB on Qwen2.5-VL's 151,936).
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

VARIANTS = {"grpo": ("algorithm.adv_estimator=grpo",), "coso": ("algorithm.adv_estimator=grpo", "cua.coso.enable=true")}
# the metrics the report reads of each step (a missing one reads as 0: the e2e CoSo test checks a real run has them)
READS = ("timing_s/step", "timing_s/update_actor", "timing_per_token_ms/update_actor", "perf/total_num_tokens",
         "coso/weight_s", "coso/weight_ms_per_token", "coso/causal_fraction", "coso/weight_mean")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Train grpo then grpo + CoSo on the same rows; print the per-step medians and the ratios as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4, help="training steps per variant (the first is a warm-up)")
    ap.add_argument("--family", default="qwen25vl", choices=("qwen25vl", "qwen3vl"))
    ap.add_argument("--tasks", default="click-test,click-button")
    ap.add_argument("--model", default=None, help="a model folder (default: the warm-started tiny `--family` model)")
    args = ap.parse_args(argv)
    require("bench.coso", ("torch", "verl", "miniwob"))

    from verl_cua.integrations.verl import dataset
    from verl_cua.testing.tiny_models import build_tiny_model
    from verl_cua.testing.warm_start import warm_start

    model = args.model or str(warm_start(build_tiny_model(args.family)))
    vocab = json.loads((Path(model) / "config.json").read_text())
    vocab = vocab.get("vocab_size") or vocab.get("text_config", {}).get("vocab_size") or 0
    with tempfile.TemporaryDirectory(prefix="bench-coso-") as tmp:
        workdir = Path(tmp)
        data = workdir / "train.parquet"
        dataset.main(["--env", "miniwob", "--tasks", args.tasks, "--seeds", "0", "--out", str(data)])
        runs = {n: train_variant("bench.coso", workdir, model, data, n, VARIANTS[n], args.steps) for n in VARIANTS}
    print(json.dumps(report(runs, args.family, args.steps, vocab), indent=2))
    return 0


def report(runs: Mapping[str, list[dict]], family: str, steps: int, vocab: int) -> dict:
    """CoSo's per-step medians (after the warm-up step) against GRPO's, from the `steps` metric rows of each
    variant's run (`VARIANTS`); `vocab`: the model's vocabulary, for the entropy's memory."""
    grpo, rows = runs["grpo"], runs["coso"]
    grpo_step = median_after_warmup(grpo, "timing_s/step")
    grpo_update = median_after_warmup(grpo, "timing_s/update_actor")
    grpo_tok = median_after_warmup(grpo, "timing_per_token_ms/update_actor")

    def extra(r):
        update = max(0.0, r.get("timing_per_token_ms/update_actor", grpo_tok) - grpo_tok) / 1000
        return r.get("coso/weight_s", 0.0) + update * r.get("perf/total_num_tokens", 0)

    same_batch = [r["timing_s/step"] / (r["timing_s/step"] - extra(r)) for r in rows]
    step, update, tok = (median_after_warmup(rows, k) for k in ("timing_s/step", "timing_s/update_actor",
                                                     "timing_per_token_ms/update_actor"))  # fmt: skip
    out = {
        "family": family,
        "steps_measured": max(1, steps - 1),
        "grpo": {
            "step_s": round(grpo_step, 3),
            "update_actor_s": round(grpo_update, 3),
            "update_ms_per_token": round(grpo_tok, 3),
        },  # fmt: skip
        "coso": {
            "step_s": round(step, 3),
            "ratio_to_grpo": round(step / grpo_step, 3) if grpo_step else None,
            "ratio_same_batch": round(statistics.median(same_batch[1:] or same_batch), 3),
            "update_actor_s": round(update, 3),
            "update_ratio_to_grpo": round(update / grpo_update, 3) if grpo_update else None,
            "update_ms_per_token": round(tok, 3),
            "update_per_token_ratio": round(tok / grpo_tok, 3) if grpo_tok else None,
            "weight_s": round(median_after_warmup(rows, "coso/weight_s"), 4),
            "weight_ms_per_token": round(median_after_warmup(rows, "coso/weight_ms_per_token"), 4),
            "weight_share_of_step": round(median_after_warmup(rows, "coso/weight_s") / step, 4) if step else None,
            "causal_fraction": round(median_after_warmup(rows, "coso/causal_fraction"), 3),
            "weight_mean": round(median_after_warmup(rows, "coso/weight_mean"), 3),
        },
        "vocab": vocab,
        "entropy_mb_per_token": round(4 * vocab / 2**20, 3),
        "anchor": "grpo, same rows, same config, same run",
    }
    return out


if __name__ == "__main__":
    sys.exit(main())
