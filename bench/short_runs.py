"""A few CPU training steps of one variant on fixed rows, for the per-step cost benches (bench.sdpo, bench.coso)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path


def train_command(workdir: Path, model: str, data: Path, name: str, overrides, steps: int) -> list[str]:
    """The `python -m verl_cua.main preset=cpu` command of `steps` training steps of `overrides` on `data` (2 prompts x
    4 episodes of 2 turns), writing under `workdir`."""
    return [
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
        *overrides,
        "cua.env.max_steps=2",
        "cua.action.max_tokens_per_step=64",
        f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        f"trainer.default_local_dir={workdir / name}",
        f"hydra.run.dir={workdir / 'hydra' / name}",
    ]


def train_variant(bench: str, workdir: Path, model: str, data: Path, name: str, overrides, steps: int) -> list[dict]:
    """`train_command`'s run, for `bench`: the per-step metric rows."""
    log = workdir / f"{name}.jsonl"
    cmd = train_command(workdir, model, data, name, overrides, steps)
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(log)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=3000)
    if proc.returncode != 0:
        raise SystemExit(f"{bench}: the {name} run failed:\n{proc.stderr[-3000:]}")
    from verl_cua.metrics_log import training_steps

    return training_steps(log, "timing_s/step")


def median_after_warmup(rows: list[dict], key: str) -> float:
    """The median of `key` over the steps after the first (a warm-up), or over all when only the first has it."""
    values = [r[key] for r in rows[1:] if key in r] or [r[key] for r in rows if key in r]
    return statistics.median(values) if values else 0.0
