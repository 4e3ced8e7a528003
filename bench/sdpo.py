"""SDPO's cost per training step against GRPO's, in one run: `python -m bench.sdpo [--steps N] [--family F]`.

Both estimators train the same tiny warm-started Qwen-VL on the same MiniWoB++ rows with the same config and seeds,
through `python -m verl_cua.main preset=cpu` (real hf rollout, real Chromium, FSDP2 on CPU). The first step is a
warm-up for both (compilation, caches); the figure is the median of the remaining `timing_s/step`, and the ratio
sdpo / grpo, GRPO's run being the anchor. Sampling differs between the two runs, so the same-batch figure comes
from the SDPO run itself: the only work SDPO adds to a GRPO step is the teacher pass (the loss is one
forward/backward either way), so `ratio_same_batch` = step / (step - teacher pass) on each SDPO step. The teacher
pass is a `compute_log_prob` over the reprompted rows, whose context is longer by the feedback block and one
screenshot. Generation dominates a step on CPU, as in TRL's text-only SDPO (0.99-1.04x GRPO per step on tiny CPU
models). Target: <= 1.2x.
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

TARGET = 1.2


def _train(workdir: Path, model: str, data: Path, estimator: str, steps: int) -> list[dict]:
    log = workdir / f"{estimator}.jsonl"
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
        f"algorithm.adv_estimator={estimator}",
        "cua.env.max_steps=2",
        "cua.action.max_tokens_per_step=64",
        f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        f"trainer.default_local_dir={workdir / estimator}",
        f"hydra.run.dir={workdir / 'hydra' / estimator}",
    ]
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(log)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=3000)
    if proc.returncode != 0:
        raise SystemExit(f"bench.sdpo: the {estimator} run failed:\n{proc.stderr[-3000:]}")
    rows = [json.loads(line)["data"] for line in log.read_text().splitlines() if line.strip()]
    return [r for r in rows if "timing_s/step" in r]


def _median(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows[1:] if key in r] or [r[key] for r in rows if key in r]
    return statistics.median(values) if values else 0.0


def main(argv: list[str] | None = None) -> int:
    """Train grpo then sdpo on the same rows; print the per-step medians and the ratio as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4, help="training steps per estimator (the first is a warm-up)")
    ap.add_argument("--family", default="qwen25vl", choices=("qwen25vl", "qwen3vl"))
    ap.add_argument("--tasks", default="click-test,click-button")
    args = ap.parse_args(argv)

    from verl_cua.integrations.verl import dataset
    from verl_cua.testing.tiny_models import build_tiny_model
    from verl_cua.testing.warm_start import warm_start

    model = str(warm_start(build_tiny_model(args.family)))
    with tempfile.TemporaryDirectory(prefix="bench-sdpo-") as tmp:
        workdir = Path(tmp)
        data = workdir / "train.parquet"
        dataset.main(["--env", "miniwob", "--tasks", args.tasks, "--seeds", "0", "--out", str(data)])
        runs = {name: _train(workdir, model, data, name, args.steps) for name in ("grpo", "sdpo")}
    grpo, sdpo = (_median(runs[n], "timing_s/step") for n in ("grpo", "sdpo"))
    teacher = _median(runs["sdpo"], "timing_s/sdpo_teacher")
    same_batch = [r["timing_s/step"] / (r["timing_s/step"] - r.get("timing_s/sdpo_teacher", 0.0)) for r in runs["sdpo"]]
    grpo_train = grpo - _median(runs["grpo"], "timing_s/gen")
    sdpo_train = sdpo - _median(runs["sdpo"], "timing_s/gen")
    report = {
        "family": args.family,
        "steps_measured": max(1, args.steps - 1),
        "grpo_step_s": round(grpo, 3),
        "sdpo_step_s": round(sdpo, 3),
        "ratio_sdpo_over_grpo": round(sdpo / grpo, 3) if grpo else None,
        "sdpo_teacher_pass_s": round(teacher, 3),
        "ratio_same_batch": round(statistics.median(same_batch[1:] or same_batch), 3),
        "grpo_step_without_generation_s": round(grpo_train, 3),
        "sdpo_step_without_generation_s": round(sdpo_train, 3),
        "sdpo_reprompt_fraction": round(_median(runs["sdpo"], "sdpo/reprompt_fraction"), 3),
        "sdpo_teacher_added_tokens_mean": round(_median(runs["sdpo"], "sdpo/teacher_added_tokens_mean"), 1),
        "target_ratio": TARGET,
        "anchor": "grpo, same rows, same config, same run",
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
