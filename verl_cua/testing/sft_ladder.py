"""The first rung of the ladder on the CPU, from end to end with the real tools: the MiniWoB++ oracle (a scripted
expert) is played through the eval harness on training layouts, `verl-cua sft-data` turns its runs into SFT rows, and
verl's SFT trainer (`python -m verl_cua.sft_main preset=cpu`) tunes the quickstart's initial model on them (the tiny
Qwen2.5-VL warm-started into click syntax only, `verl_cua.testing.learning`: a random tiny model learns the digits of
a click too slowly for CI through verl's trainer, docs/sft.md). The tuned folder is cached by recipe.

    python -m verl_cua.testing.sft_ladder [--tasks click-test,focus-text] [--seeds 0-63]   # prints its path
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from verl_cua.testing.model_cache import derived_model

RECIPE_VERSION = "1"
TASKS = ("click-test", "focus-text")
SEEDS = "0-63"  # training layouts
HELDOUT = "100000-100063"  # layouts never trained on (the quickstart's held-out range)
FORMAT = "pyautogui"
EPOCHS = 5
BATCH = 8
LR = 2e-3  # a tiny model needs its warm start's scale (docs/learning.md), not a pretrained model's 1e-5


def sft_overrides(model: str, train: str, ckpt: str, *, epochs: int = EPOCHS, batch: int = BATCH, lr: float = LR):
    """The `python -m verl_cua.sft_main` overrides of the CPU rung."""
    return [
        "preset=cpu",
        f"model.path={model}",
        f"data.train_files={train}",
        f"data.train_batch_size={batch}",
        f"optim.lr={lr}",
        "optim.lr_warmup_steps_ratio=0",
        "optim.lr_scheduler_type=constant",
        f"trainer.total_epochs={epochs}",
        f"trainer.default_local_dir={ckpt}",
        "trainer.save_freq=-1",
    ]


def final_model(ckpt: str | Path) -> Path:
    """The Hugging Face folder of an SFT run's last checkpoint (what RL and `verl-cua serve` start from)."""
    ckpt = Path(ckpt)
    tracker = ckpt / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        raise FileNotFoundError(f"{ckpt} holds no finished SFT run ({tracker.name} is missing)")
    return ckpt / f"global_step_{tracker.read_text().strip()}" / "huggingface"


def base_model() -> Path:
    """The model the rung tunes: the quickstart's initial model (click syntax only, clicks anywhere)."""
    from verl_cua.testing.learning import learnable_model

    return learnable_model()


def sft_model(tasks: tuple[str, ...] = TASKS, seeds: str = SEEDS, epochs: int = EPOCHS, lr: float = LR) -> Path:
    """The base model after SFT on the oracle's runs of `tasks` x `seeds` (built once, then cached)."""
    base = base_model()
    recipe = f"{RECIPE_VERSION}|{base.resolve()}|{list(tasks)}|{seeds}|{epochs}|{lr}|{BATCH}|{FORMAT}"

    def build(work: Path) -> Path:
        climb(work, base, tasks=tasks, seeds=seeds, epochs=epochs, lr=lr)
        return final_model(work / "ckpt")

    return derived_model(base, "sft", recipe, build)


def climb(work: Path, base: Path, *, tasks=TASKS, seeds=SEEDS, epochs=EPOCHS, lr=LR) -> dict:
    """Expert runs -> SFT rows -> verl SFT in `work` (runs/, sft.parquet, ckpt/); returns the dataset card."""
    from verl_cua.sft.data import SFTDataConfig, build
    from verl_cua.testing.expert_runs import expert_runs

    summary = expert_runs(work / "runs", tasks=tuple(tasks), seeds=seeds, workers=2)
    if summary["success_rate"] < 1.0:
        raise RuntimeError(f"the oracle failed some training layouts: {summary}")
    rows = str(work / "sft.parquet")
    card = build(SFTDataConfig(runs=[str(work / "runs")], format=FORMAT, model=str(base), out=rows))
    overrides = sft_overrides(str(base), rows, str(work / "ckpt"), epochs=epochs, batch=BATCH, lr=lr)
    cmd = [sys.executable, "-m", "verl_cua.sft_main", *overrides]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (work / "sft.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        raise RuntimeError(f"python -m verl_cua.sft_main failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return card


def heldout_success(model_dir: str | Path, out: str | Path, *, tasks=TASKS, seeds: str = HELDOUT,
                    temperature: float = 1.0) -> float:  # fmt: skip
    """Success of `model_dir` on held-out layouts, served by `verl-cua serve`'s server (in a thread) and scored by
    `verl-cua eval`, one step an episode, sampled at `temperature` as in training (the quickstart's measure)."""
    import threading

    from verl_cua.cli import main as cli
    from verl_cua.envs.trajectory import read_run
    from verl_cua.serve.server import ChatModel, ChatServer

    server = ChatServer(ChatModel(model_dir, name="heldout"), port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        args = ["eval", "--env", "miniwob", "--tasks", ",".join(tasks), "--seeds", seeds, "--model", "heldout",
                "--base-url", server.url, "--format", FORMAT, "--max-steps", "1", "--max-tokens", "32",
                "--temperature", str(temperature), "--workers", "2", "--no-progress", "--out", str(out)]  # fmt: skip
        if cli(args) not in (0,):
            raise RuntimeError(f"verl-cua eval of {model_dir} failed")
    finally:
        server.shutdown()
    _, episodes = read_run(out)
    return sum(e.status == "success" for e in episodes.values()) / len(episodes)


def main(argv: list[str] | None = None) -> int:
    """CLI: build (or find) the SFT-tuned tiny model and print its path."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--seeds", default=SEEDS)
    args = ap.parse_args(argv)
    print(sft_model(tuple(args.tasks.split(",")), args.seeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
