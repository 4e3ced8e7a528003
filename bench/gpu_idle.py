"""The CPU work a training step does while the GPUs wait, before and after, at the flagship's shapes:
`python -m bench.gpu_idle [--episodes N] [--out DIR]`.

Three places, each measured in this process (CPU seconds: `time.process_time`, every thread counted) with the old way
as the anchor of its ratio, since both run back to back on the same machine:
- `engine`: the actor's screenshot expansion over one step's passes (old log-probs, SDPO's student top-k and
  teacher pass on the reprompted rows, the update), each row expanded in full (before) against the rank's screenshot
  cache with its prefetch at the default budget, bf16 entries as on the GPU (after). A rank's 240 rows are drawn at
  random from the flagship's step (128 episodes x 15 step rows of 1312x736 screenshots, a history of 3), as verl's
  balancing spreads an episode's rows over the ranks; figures scaled to 240 rows when `--rows` is smaller;
- `agent_loop`: a step prompt of 3 screenshots through verl's Continuous Token render (the whole processor, patches
  dropped) against prompt tokens from grids, scaled to a worker's prompts per step (1920 prompts over 8 workers);
- `transfer_queue`: the bytes logit SDPO's two top-k passes hand TransferQueue for one row (k fields over the whole
  sequence against one field of response positions), and per step at the doctor's worst case; and the number of
  puts of the loss fields (one per row against one per row shape).
The tiny Qwen3-VL built locally brings the processor, with Qwen3-VL-8B's image limits put back (patch 16, merge 2,
up to 16M pixels: 943 tokens and 22 MiB of fp32 patches a screenshot).
Writes OUT/gpu_idle.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.requires import require

ROOT = Path(__file__).resolve().parents[1]
FLAGSHIP_ROWS_PER_STEP = 1920  # 128 episodes x 15 steps: the doctor's worst case for the flagship
RANKS = WORKERS = 8
SIZE = (1312, 736)
HISTORY = 3
REPROMPTED = 2 / 3  # share of rows SDPO reprompts (failed episodes of groups with a success)
TOPK, PROMPT_TOKENS, TEACHER_TOKENS, RESPONSE_TOKENS = 100, 6006, 8000, 80
QWEN3VL_SIZE = {"shortest_edge": 65536, "longest_edge": 16777216}  # Qwen3-VL-8B-Instruct's preprocessor limits


def flagship_processor_dir(out: Path) -> str:
    """A copy of the tiny Qwen3-VL whose image processor has Qwen3-VL-8B's limits (the tiny one caps images)."""
    import shutil

    from verl_cua.testing.tiny_models import build_tiny_model

    dest = out / "qwen3vl-flagship-limits"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(build_tiny_model("qwen3vl"), dest)
    config = json.loads((dest / "processor_config.json").read_text())
    config["image_processor"]["size"] = dict(QWEN3VL_SIZE)
    (dest / "processor_config.json").write_text(json.dumps(config, indent=2))
    return str(dest)


def _screenshot(seed: int):
    """A desktop-like 1312x736 screenshot: panels, text lines, noise where photos would be."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    image = Image.new("RGB", SIZE, (rng.randrange(200, 240),) * 3)
    draw = ImageDraw.Draw(image)
    for _ in range(40):
        x, y = rng.randrange(0, SIZE[0] - 200), rng.randrange(0, SIZE[1] - 40)
        colour = tuple(rng.randrange(0, 255) for _ in range(3))
        draw.rectangle((x, y, x + rng.randrange(40, 200), y + rng.randrange(10, 40)), fill=colour)
        draw.text((x + 4, y + 2), f"Item {rng.randrange(1000)}", fill=(0, 0, 0))
    photo = Image.effect_noise((320, 200), 60).convert("RGB")
    image.paste(photo, (rng.randrange(0, 900), rng.randrange(0, 500)))
    return image


def _rows(rows: int, episodes: int, steps: int, image_processor, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """One rank's share of a step: `rows` step rows drawn at random from `episodes` x `steps` (verl balances rows
    across ranks by length, so an episode's rows land on several ranks), compact as TransferQueue holds them; and
    the teacher rows SDPO builds from two in three of them (each with its episode's final screenshot)."""
    import torch

    from verl_cua.integrations.verl.screenshots.compact import compact, image_grid, insert_png

    shots: dict[tuple[int, int], object] = {}

    def shot(e: int, t: int):
        if (e, t) not in shots:
            shots[e, t] = _screenshot(1000 * e + t)
        return shots[e, t]

    rng = random.Random(seed)
    picked = rng.sample([(e, t) for e in range(episodes) for t in range(steps)], rows)
    out, teacher = [], []
    for i, (e, t) in enumerate(picked):
        recent = [shot(e, u) for u in range(max(0, t - HISTORY + 1), t + 1)]
        grid = torch.cat([image_grid(s, image_processor) for s in recent])
        out.append(compact({"image_grid_thw": grid}, recent))
        if i % 3:
            final = shot(e, steps)
            teacher.append(insert_png(out[-1], 0, final, image_grid(final, image_processor)))
    return out, teacher


def engine_variant(variant: str, rows: int, episodes: int, steps: int, path: str) -> dict:
    """One variant of the engine's expansions over a step's passes on a rank, in this (fresh) process: `before`
    expands every row in full, `after` goes through the screenshot cache as the engine does."""
    import torch
    from transformers import AutoProcessor

    from verl_cua.integrations.verl.screenshots.cache import ScreenshotCache, budget_bytes, prefetch_enabled
    from verl_cua.integrations.verl.screenshots.compact import decode_png, expand_grids, expand_one, row_pngs

    ip = AutoProcessor.from_pretrained(path).image_processor
    batch_rows, teacher = _rows(rows, episodes, steps, ip)
    reprompted = [r for i, r in enumerate(batch_rows) if i % 3]
    passes = [batch_rows, reprompted, teacher, batch_rows]  # old log-probs, student top-k, teacher, update
    cache = ScreenshotCache(lambda data: expand_one(data, ip), budget_bytes(), torch.bfloat16)
    t0, w0 = time.process_time(), time.perf_counter()
    for batch in passes:
        if variant == "before":  # the old path: each row's PNGs processed together, then verl's concatenation
            for row in batch:
                out = ip(images=[decode_png(d) for d in row["cua_images"]], return_tensors="pt")
                torch.cat([out["pixel_values"]])
            continue
        cache.prefetch(row_pngs(batch) if prefetch_enabled() else [])  # what the engine does at each batch
        for row in batch:  # a micro-batch of one row, as the flagship's update: the engine's one concatenation
            _rows_out, patches = expand_grids([row], ip, cache)
            torch.cat(patches)
            cache.release()
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    return {
        "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "rows": len(batch_rows),
        "images": sum(len(r["cua_images"]) for batch in passes for r in batch),
        "distinct": len({d for batch in passes for d in row_pngs(batch)}),
        "expanded": cache.stats["expanded"] + cache.stats["prefetched"], "cache_gib": round(cache.nbytes / 2**30, 2),
        "max_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
    }  # fmt: skip


def engine(rows: int, episodes: int, steps: int, path: str) -> dict:
    """CPU seconds of one step's expansions on a rank, before and after, each in its own process (a worker's heap
    is not the other variant's leftovers); default cache budget, bf16 entries as on the GPU."""
    from verl_cua.integrations.verl.screenshots.cache import budget_bytes, prefetch_enabled

    runs = {}
    for variant in ("before", "after"):
        argv = [sys.executable, "-m", "bench.gpu_idle", "--engine-variant", variant, "--model", path,
                "--rows", str(rows), "--episodes", str(episodes), "--steps", str(steps)]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
        runs[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after = runs["before"], runs["after"]
    scale = FLAGSHIP_ROWS_PER_STEP / RANKS / after["rows"]
    return {
        "rows": after["rows"], "screenshots_distinct": after["distinct"],
        "screenshots_expanded_before": before["images"], "screenshots_expanded_after": after["expanded"],
        "cpu_s_before": before["cpu_s"], "cpu_s_after": after["cpu_s"],
        "ratio_after_before": round(after["cpu_s"] / before["cpu_s"], 3),
        "wall_s_before": before["wall_s"], "wall_s_after": after["wall_s"],
        "cpu_s_per_step_per_rank_before": round(before["cpu_s"] * scale, 1),
        "cpu_s_per_step_per_rank_after": round(after["cpu_s"] * scale, 1),
        "cache_gib": after["cache_gib"], "cache_budget_gib": round(budget_bytes() / 2**30, 2),
        "prefetch": prefetch_enabled(),
        "max_rss_gib_before": before["max_rss_gib"], "max_rss_gib_after": after["max_rss_gib"],
    }  # fmt: skip


def agent_loop(prompts: int, path: str) -> dict:
    """CPU seconds of a step prompt's tokens: verl's render against grids."""
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    from verl_cua.actions.conversation import step_prompt
    from verl_cua.actions.prompts import build_prompt
    from verl_cua.integrations.verl.screenshots.grid_prompts import use_grid_prompts

    def builder():
        return create_continuous_token_builder(
            AutoTokenizer.from_pretrained(path), hf_model_type=AutoConfig.from_pretrained(path).model_type,
            chat_template_kwargs={}, mm_processor_kwargs={}, processor=AutoProcessor.from_pretrained(path),
        )  # fmt: skip

    verl_builder, ours = builder(), builder()
    use_grid_prompts(ours)
    spec = build_prompt("qwen3vl", screen=(1920, 1080), image=SIZE)
    cases = []
    for i in range(prompts):
        shots = [_screenshot(7000 + i + j) for j in range(HISTORY)]
        actions = [f"click({10 * j}, {20 * j})" for j in range(i % 10)]
        cases.append((step_prompt(spec, "Rename the file.", actions, [False] * len(actions), shots), shots))
    ours.build_initial_tokens(*cases[0][:1], images=cases[0][1])  # its one check against verl's render
    timings = {}
    for name, b in (("before", verl_builder), ("after", ours)):
        t0 = time.process_time()
        tokens = [b.build_initial_tokens(messages, images=shots) for messages, shots in cases]
        timings[name] = time.process_time() - t0
        timings[f"{name}_tokens"] = tokens
    same = timings.pop("before_tokens") == timings.pop("after_tokens")
    scale = FLAGSHIP_ROWS_PER_STEP / WORKERS / prompts
    return {
        "prompts": prompts, "same_tokens": same,
        "cpu_ms_per_prompt_before": round(1000 * timings["before"] / prompts, 1),
        "cpu_ms_per_prompt_after": round(1000 * timings["after"] / prompts, 1),
        "ratio_after_before": round(timings["after"] / timings["before"], 3),
        "cpu_s_per_step_per_worker_before": round(timings["before"] * scale, 1),
        "cpu_s_per_step_per_worker_after": round(timings["after"] * scale, 1),
    }  # fmt: skip


def transfer_queue(rows: int = 8) -> dict:
    """Bytes of the top-k passes' outputs per row and per step; puts of the loss fields."""
    import torch
    from tensordict import TensorDict

    from verl_cua.integrations.verl.sdpo import logit

    def pass_bytes(seq: int) -> tuple[int, int]:
        lengths = [seq - RESPONSE_TOKENS, RESPONSE_TOKENS]
        full = {
            logit.field(j): torch.nested.as_nested_tensor([torch.zeros(seq) for _ in range(rows)], layout=torch.jagged)
            for j in range(TOPK)
        }
        output = TensorDict(full, batch_size=[rows])
        before = sum(v.values().numel() * v.values().element_size() for v in output.values())
        mask = torch.nested.as_nested_tensor([torch.ones(lengths[1]) for _ in range(rows)], layout=torch.jagged)
        packed = logit.pack_pass_output(output, mask)[logit.PACKED].values()
        return before // rows, packed.numel() * packed.element_size() // rows

    student = pass_bytes(PROMPT_TOKENS + RESPONSE_TOKENS)
    teacher = pass_bytes(TEACHER_TOKENS + RESPONSE_TOKENS)
    reprompted = int(FLAGSHIP_ROWS_PER_STEP * REPROMPTED)
    per_step = [reprompted * (s + t) for s, t in zip(student, teacher, strict=True)]
    rng = random.Random(0)
    response_lengths = [rng.randint(20, 200) for _ in range(FLAGSHIP_ROWS_PER_STEP)]
    return {
        "topk": TOPK, "response_tokens": RESPONSE_TOKENS,
        "student_pass_bytes_per_row_before": student[0], "student_pass_bytes_per_row_after": student[1],
        "teacher_pass_bytes_per_row_before": teacher[0], "teacher_pass_bytes_per_row_after": teacher[1],
        "gb_per_step_before": round(per_step[0] / 1e9, 2), "gb_per_step_after": round(per_step[1] / 1e9, 3),
        "ratio_after_before": round(per_step[1] / per_step[0], 4),
        "loss_field_puts_per_step_before": FLAGSHIP_ROWS_PER_STEP,
        "loss_field_puts_per_step_after": len(set(response_lengths)),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=240, help="a rank's rows of the step (default 240: 1920 over 8)")
    ap.add_argument("--episodes", type=int, default=128, help="episodes of the step (default 128, the flagship's)")
    ap.add_argument("--steps", type=int, default=15, help="turns per episode (default 15, the flagship's)")
    ap.add_argument("--prompts", type=int, default=20, help="agent-loop prompts to time (default 20)")
    ap.add_argument("--out", default="outputs/bench_gpu_idle")
    ap.add_argument("--engine-variant", choices=("before", "after"), help=argparse.SUPPRESS)  # a child process
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    require("bench.gpu_idle", ("torch", "verl"))
    if args.engine_variant:
        print(json.dumps(engine_variant(args.engine_variant, args.rows, args.episodes, args.steps, args.model)))
        return 0
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    path = flagship_processor_dir(out)
    record = {
        "engine": engine(args.rows, args.episodes, args.steps, path),
        "agent_loop": agent_loop(args.prompts, path),
        "transfer_queue": transfer_queue(),
    }
    (out / "gpu_idle.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
