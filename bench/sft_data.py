"""What `verl-cua sft-data` costs per 1,000 steps, against an anchor in the same run: reading every step's screenshot
from disk and decoding it (the least any converter must do).

Episodes are written with the trajectory writer as `verl-cua eval` writes them: Claude replies (`left_click`, `type`,
a key chord) on a 1920x1080 desktop whose screenshots are noisy (PNG cannot shrink them much, like real desktops with
text); they are converted into Qwen3-VL rows at the flagship's pixel cap (1003520) with the tiny Qwen3-VL's processor.

    python -m bench.sft_data [--episodes 40] [--steps 5] [--rows step]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from bench.requires import require


def write_runs(root: Path, episodes: int, steps: int, screen=(1920, 1080)) -> int:
    """`episodes` successful Claude episodes of `steps` steps each; returns the steps written."""
    import numpy as np
    from PIL import Image

    from verl_cua.actions import parse_action
    from verl_cua.envs.trajectory import EpisodeWriter, step_record, write_json

    rng = random.Random(0)
    replies = [
        [{"type": "text", "text": "I click the field."},
         {"type": "tool_use", "name": "computer", "input": {"action": "left_click", "coordinate": [640, 360]}}],
        [{"type": "tool_use", "name": "computer", "input": {"action": "type", "text": "quarterly report"}}],
        [{"type": "tool_use", "name": "computer", "input": {"action": "key", "text": "ctrl+s"}}],
    ]  # fmt: skip
    for e in range(episodes):
        writer = EpisodeWriter(root / "docs" / f"task-{e}")
        for i in range(steps):
            pixels = np.random.default_rng(e * 100 + i).integers(0, 256, (screen[1] // 8, screen[0] // 8, 3), "uint8")
            shot = Image.fromarray(pixels).resize(screen, Image.NEAREST)
            text = json.dumps(rng.choice(replies))
            parsed = parse_action(text, format="claude", screen=screen, image=(1280, 720))
            name = writer.screenshot(i, shot)
            writer.step(step_record(step=i + 1, screenshot=name, screen=screen, model_text=text,
                                    action=parsed.to_dict(), valid=parsed.valid, error=parsed.error))  # fmt: skip
        writer.finish({"task": f"docs/task-{e}", "env": "osworld", "domain": "docs", "task_id": f"task-{e}",
                       "instruction": "Save the report.", "status": "success", "score": 1.0, "steps": steps,
                       "model": "claude-bench"})  # fmt: skip
    write_json(root / "run.json", {"model": "claude-bench", "format": "claude"})
    return episodes * steps


def anchor_seconds(root: Path) -> float:
    """Read and decode every screenshot of the run (the bare minimum of a conversion)."""
    from PIL import Image

    start = time.perf_counter()
    for path in sorted(root.rglob("step_*.png")):
        with Image.open(path) as image:
            image.convert("RGB").load()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Build the runs, time the anchor and `sft-data` twice each (alternating), print the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=40)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rows", default="step", choices=["episode", "step"])
    args = ap.parse_args(argv)
    require("bench.sft_data", ("torch", "pandas", "pyarrow"))  # the tiny model; sft-data's parquet
    from transformers import AutoProcessor

    from verl_cua.sft.data import SFTDataConfig, build
    from verl_cua.testing.tiny_models import build_tiny_model

    model = build_tiny_model("qwen3vl")
    processor = AutoProcessor.from_pretrained(model)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        n = write_runs(root, args.episodes, args.steps)
        anchors, builds = [], []
        for _ in range(2):
            anchors.append(anchor_seconds(root))
            config = SFTDataConfig(runs=[str(root)], format="qwen3vl", model=str(model), out=f"{tmp}/sft.parquet",
                                   rows=args.rows, max_pixels=1003520)  # fmt: skip
            start = time.perf_counter()
            card = build(config, processor)
            builds.append(time.perf_counter() - start)
    anchor, built = min(anchors), min(builds)
    print(json.dumps({
        "steps": n, "rows": card["rows"], "rows_layout": args.rows, "tokens_mean": round(card["tokens"]["mean"]),
        "sft_data_s_per_1000_steps": round(1000 * built / n, 1), "anchor_s_per_1000_steps": round(1000 * anchor / n, 1),
        "ratio_to_anchor": round(built / anchor, 2),
    }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
