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
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.requires import require

VARIANTS = {"grpo": ("algorithm.adv_estimator=grpo",), "coso": ("algorithm.adv_estimator=grpo", "cua.coso.enable=true")}


def _train(workdir: Path, model: str, data: Path, name: str, steps: int) -> list[dict]:
    log = workdir / f"{name}.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "verl_cua.main",
        "preset=cpu",
        f"data.train_files={data}",
        f"data.val_files={data}",
        "data.train_batch_size=2",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        *VARIANTS[name],
        "cua.env.max_steps=2",
        "cua.action.max_tokens_per_step=64",
        f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        f"trainer.default_local_dir={workdir / name}",
        f"hydra.run.dir={workdir / 'hydra' / name}",
    ]
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(log)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=3000)
    if proc.returncode != 0:
        raise SystemExit(f"bench.coso: the {name} run failed:\n{proc.stderr[-3000:]}")
    from verl_cua.metrics_log import training_steps

    return training_steps(log, "timing_s/step")


def _median(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows[1:] if key in r] or [r[key] for r in rows if key in r]
    return statistics.median(values) if values else 0.0


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
        runs = {name: _train(workdir, model, data, name, args.steps) for name in VARIANTS}
    grpo, rows = runs["grpo"], runs["coso"]
    grpo_step, grpo_update = _median(grpo, "timing_s/step"), _median(grpo, "timing_s/update_actor")
    grpo_tok = _median(grpo, "timing_per_token_ms/update_actor")

    def extra(r):
        update = max(0.0, r.get("timing_per_token_ms/update_actor", grpo_tok) - grpo_tok) / 1000
        return r.get("coso/weight_s", 0.0) + update * r.get("perf/total_num_tokens", 0)

    same_batch = [r["timing_s/step"] / (r["timing_s/step"] - extra(r)) for r in rows]
    step, update, tok = (_median(rows, k) for k in ("timing_s/step", "timing_s/update_actor",
                                                     "timing_per_token_ms/update_actor"))  # fmt: skip
    report = {
        "family": args.family,
        "steps_measured": max(1, args.steps - 1),
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
            "weight_s": round(_median(rows, "coso/weight_s"), 4),
            "weight_ms_per_token": round(_median(rows, "coso/weight_ms_per_token"), 4),
            "weight_share_of_step": round(_median(rows, "coso/weight_s") / step, 4) if step else None,
            "causal_fraction": round(_median(rows, "coso/causal_fraction"), 3),
            "weight_mean": round(_median(rows, "coso/weight_mean"), 3),
        },
        "vocab": vocab,
        "entropy_mb_per_token": round(4 * vocab / 2**20, 3),
        "anchor": "grpo, same rows, same config, same run",
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
