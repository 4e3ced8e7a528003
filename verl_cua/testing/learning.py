"""The learnable CPU setting: a tiny Qwen-VL, warm-started into click syntax only, trained by verl on MiniWoB++ tasks
whose success needs the screenshot, and scored on held-out seeds. Shared by `bench.learn`, the quickstart and the
learning test, so all three measure the same thing.

    python -m verl_cua.testing.learning model            # build the warm-started model, print its path
    python -m verl_cua.testing.learning data OUT_DIR     # write OUT_DIR/train.parquet and OUT_DIR/heldout.parquet
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SUCCESS = "cua/success_rate"
HELDOUT = "val-core/verl_cua/miniwob/acc/mean@{n}"

# The instruction of each task the warm start may see (the text only: its clicks are drawn at random points)
INSTRUCTIONS = {"click-test": "Click the button.", "focus-text": "Focus into the textbox."}


@dataclass(frozen=True)
class LearningSetting:
    """Everything a learning run is made of except the estimator and the run's seed."""

    family: str = "qwen25vl"
    tasks: tuple[str, ...] = ("click-test",)
    train_seeds: str = "0-999"  # the layouts trained on (a step draws `prompts_per_step` of them)
    heldout_seeds: str = "100000-100063"  # layouts never trained on, for held-out success
    warm_steps: int = 3000  # SFT steps into `pyautogui.click(x, y)` at uniformly random points (syntax, not answers)
    lr: float = 2e-3
    prompts_per_step: int = 2
    n: int = 16  # episodes per prompt (the GRPO group)
    steps: int = 60
    max_tokens: int = 24  # one click is ~16 tokens
    heldout_samples: int = 2  # sampled episodes per held-out layout, before and after training
    extra: tuple[str, ...] = field(default_factory=tuple)  # more Hydra overrides, e.g. a test's

    def model(self) -> Path:
        """The tiny random model of `family`, warm-started into valid click syntax (built once, cached)."""
        from verl_cua.testing.tiny_models import build_tiny_model
        from verl_cua.testing.warm_start import warm_start

        instructions = tuple(INSTRUCTIONS[t] for t in self.tasks)
        return warm_start(build_tiny_model(self.family), steps=self.warm_steps, instructions=instructions)

    def datasets(self, out: str | Path) -> tuple[Path, Path]:
        """verl parquet rows of the training and the held-out layouts, in `out`."""
        from verl_cua.integrations.verl.dataset import miniwob_rows, write_parquet

        out = Path(out)
        train = write_parquet(miniwob_rows(list(self.tasks), self.train_seeds), out / "train.parquet")
        heldout = write_parquet(miniwob_rows(list(self.tasks), self.heldout_seeds), out / "heldout.parquet")
        return train, heldout

    def overrides(self, model: str | Path, train: Path, heldout: Path) -> list[str]:
        """The Hydra overrides of `python -m verl_cua.main preset=cpu` for this setting (estimator: GRPO)."""
        return [
            f"data.train_files={train}",
            f"data.val_files={heldout}",
            f"data.train_batch_size={self.prompts_per_step}",
            f"actor_rollout_ref.model.path={model}",
            f"actor_rollout_ref.actor.optim.lr={self.lr}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={self.prompts_per_step}",
            f"actor_rollout_ref.rollout.n={self.n}",
            "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
            f"actor_rollout_ref.rollout.val_kwargs.n={self.heldout_samples}",
            "algorithm.adv_estimator=grpo",
            "cua.env.name=miniwob",
            "cua.env.max_steps=1",
            "cua.action.format=pyautogui",
            f"cua.action.max_tokens_per_step={self.max_tokens}",
            f"trainer.total_training_steps={self.steps}",
            "trainer.val_before_train=true",
            f"trainer.test_freq={self.steps}",
            *self.extra,
        ]


@dataclass
class LearningRun:
    """One training run's curve: success per training step and held-out success before and after."""

    success_rate: list[float]
    heldout_success_rate: list[float]
    seconds: float
    steps: list[dict[str, Any]]

    def window(self, k: int, last: bool = False) -> float:
        """Mean success over the first (or last) `k` training steps."""
        values = self.success_rate[-k:] if last else self.success_rate[:k]
        return sum(values) / len(values)


def train(
    setting: LearningSetting,
    out: str | Path,
    *overrides: str,
    seed: int = 0,
    save: bool = False,
    timeout: float = 3600,
) -> LearningRun:
    """Train once in `out` (`python -m verl_cua.main preset=cpu`); `overrides` come last and win."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = setting.model()
    train_file, heldout_file = setting.datasets(out / "data")
    log = out / "metrics.jsonl"
    log.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "verl_cua.main",
        "preset=cpu",
        *setting.overrides(model, train_file, heldout_file),
        f"data.seed={seed}",
        f"trainer.default_local_dir={out / 'checkpoints'}",
        f"trainer.save_freq={setting.steps if save else -1}",
        f"hydra.run.dir={out / 'hydra'}",
        *overrides,
    ]
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(log), "RAY_DEDUP_LOGS": "0"}
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=out)
    seconds = time.monotonic() - start
    (out / "train.log").write_text(proc.stdout + "\n" + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"training failed (exit {proc.returncode}); see {out / 'train.log'}:\n{proc.stderr[-3000:]}")
    return read_run(log, setting.heldout_samples, seconds)


def read_run(log: str | Path, heldout_samples: int, seconds: float = 0.0) -> LearningRun:
    """A `LearningRun` from verl's file-logger JSONL."""
    records = [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]
    steps = [r["data"] for r in records if SUCCESS in r["data"]]
    key = HELDOUT.format(n=heldout_samples)
    heldout = [r["data"][key] for r in records if key in r["data"]]
    return LearningRun([s[SUCCESS] for s in steps], heldout, seconds, steps)


def main(argv: list[str] | None = None) -> int:
    """CLI: `model` prints the warm-started model's path; `data OUT` writes the train and held-out parquet files."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("model", help="build the warm-started tiny model and print its path")
    data = sub.add_parser("data", help="write OUT/train.parquet and OUT/heldout.parquet")
    data.add_argument("out")
    args = ap.parse_args(argv)
    setting = LearningSetting()
    if args.what == "model":
        print(setting.model())
    else:
        print(json.dumps([str(p) for p in setting.datasets(args.out)]))
    return 0


__all__ = ["LearningRun", "LearningSetting", "read_run", "replace", "train"]

if __name__ == "__main__":
    raise SystemExit(main())
