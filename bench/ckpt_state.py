"""Size and save time of our checkpoint state at the flagship's scale: `python -m bench.ckpt_state [--episodes N]`.

The flagship (recipes/run_qwen3vl_sdpo_osworld.sh) with Entropulse or replay keeps whole successful trajectories in
the success buffer: here `--episodes` trajectories (default 128) of 15 step rows, each row with up to 3 screenshots
stored as PNG (`cua.env.image_storage=png`, the default), built as bench.memory builds a step's rows (real screenshots
of the local desktop, drawn ones where it cannot start; the tiny Qwen3-VL's processor with Qwen3-VL's limits). The
buffer goes through the trainer's own save (`write_state_dir`: torch.save, fsync, sha256, rename) and load
(`read_state_dir`: sha256 check, weights_only load).

Anchor, in the same run: a plain torch.save + fsync of a tensor of the same size, so `save_vs_raw_write` is our
format's overhead over the disk. From that disk's rate the run extrapolates the other two parts of a flagship
checkpoint per actor rank (Qwen3-VL-8B, 8 GPUs, FSDP): verl's own (fp32 weights and Adam's two moments, 12 bytes a
parameter) and our EMA teacher shard (fp32, 4 bytes a parameter).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.memory import STEPS, _processor, _rows, _screens
from bench.requires import require

FLAGSHIP_PARAMS = 8.77e9  # Qwen3-VL-8B-Instruct
FLAGSHIP_RANKS = 8
GIB = 2**30


def _own(value):
    """A copy of `value` sharing no object with it: rows the trainer buffers come out of TransferQueue one by one, so
    no two hold the same bytes or tensor (torch.save would store a shared one once)."""
    import torch

    if isinstance(value, bytes):
        return bytes(bytearray(value))
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {k: _own(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_own(v) for v in value)
    return value


def _buffer(episodes: int, screens: str):
    """A success buffer of `episodes` trajectories x 15 step rows, as the trainer buffers them."""
    import torch

    from verl_cua.algos.success_buffer import SuccessBuffer

    buffer = SuccessBuffer(per_task=8)
    rows = _rows(_processor(), _screens(screens), episodes, "png")
    for episode in range(episodes):
        items = []
        for _ in range(STEPS):
            row = next(rows)
            item = {k: row[k] for k in ("input_ids", "position_ids", "multi_modal_inputs", "prompts", "responses")}
            item.update(response_mask=row["response_mask"], loss_mask=row["loss_mask"])
            item.update(rm_scores=torch.zeros(len(row["responses"])), num_turns=2)
            item.update(rollout_log_probs=row["rollout_log_probs"], extra_fields=dict(row["extra_fields"]))
            items.append(_own(item))
        actions = list(items[-1]["extra_fields"]["cua_actions"])
        buffer.add(f"task{episode // 8}@seed={episode % 8}", f"ep{episode}", {"actions": actions, "rows": items})
    return buffer


def main(argv: list[str] | None = None) -> int:
    """Build the buffer, save and load it as the trainer does, write the raw anchor; print one JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=128, help="buffered trajectories (flagship: 128)")
    ap.add_argument("--screens", choices=("desktop", "synthetic"), default="desktop")
    args = ap.parse_args(argv)
    require("bench.ckpt_state", ("torch", "verl"))

    import torch

    from verl_cua.algos.entropulse import Entropulse
    from verl_cua.integrations.verl.config.schema import EntropulseConfig
    from verl_cua.integrations.verl.resume.checkpoint_io import read_state_dir, save_tensor_file, write_state_dir

    t0 = time.perf_counter()
    buffer = _buffer(args.episodes, args.screens)
    built_s = time.perf_counter() - t0
    state = {
        "global_step": 100, "entropulse": Entropulse(EntropulseConfig(schedule="fixed")).state_dict(),
        "buffer": buffer.state_dict(), "rng": [3, list(range(625)), None], "totals": {"infra_failures": 0},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        t0 = time.perf_counter()
        manifest = write_state_dir(Path(tmp) / "global_step_100", state, {"global_step": 100})
        save_s = time.perf_counter() - t0
        size = manifest["files"]["state.pt"]["bytes"]
        t0 = time.perf_counter()
        loaded, _ = read_state_dir(Path(tmp) / "global_step_100")
        load_s = time.perf_counter() - t0
        assert len(loaded["buffer"]["tasks"]) == len(buffer.tasks())
        t0 = time.perf_counter()
        save_tensor_file(torch.zeros(size // 4, dtype=torch.float32), Path(tmp) / "raw.pt")
        raw_s = time.perf_counter() - t0
    rate = size / raw_s  # bytes/s of this disk, fsync included
    per_rank_verl = FLAGSHIP_PARAMS * 12 / FLAGSHIP_RANKS
    per_rank_ema = FLAGSHIP_PARAMS * 4 / FLAGSHIP_RANKS
    out = {
        "episodes": args.episodes, "rows": args.episodes * STEPS, "built_s": round(built_s, 1),
        "state_gib": round(size / GIB, 3), "save_s": round(save_s, 2), "load_s": round(load_s, 2),
        "raw_write_s": round(raw_s, 2), "save_vs_raw_write": round(save_s / raw_s, 2),
        "disk_gib_s": round(rate / GIB, 3),
        "flagship_rank_verl_gib": round(per_rank_verl / GIB, 1), "flagship_rank_ema_gib": round(per_rank_ema / GIB, 1),
        "flagship_buffer_vs_verl_rank": round(size / per_rank_verl, 4),
        "flagship_ema_vs_verl": round(per_rank_ema / per_rank_verl, 3),
    }  # fmt: skip
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
