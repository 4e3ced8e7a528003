"""Host memory of one training step at the flagship's scale: `python -m bench.memory [--episodes N] [--sample N]`.

The flagship (recipes/run_qwen3vl_sdpo_osworld.sh) trains on 128 episodes a step (16 tasks x 8), 15 step rows each,
up to 3 screenshots per row at 1920x1080 resized under 1,003,520 pixels (1312x736, 943 Qwen3-VL tokens). For each
way of storing screenshots (`cua.env.image_storage`: verl's fp32 `pixel_values`, before, and our PNGs, after):

* TransferQueue: every row is built as verl's agent-loop worker builds it (`CuaAgentLoopWorker
  ._compute_multi_modal_inputs` on the real processor, token tensors, [4, L] M-RoPE positions) and serialised field
  by field as TransferQueue stores it; the figure is the sum of the stored bytes.
* Driver: a fresh process runs the SDPO teacher pass's data work: it loads the fields the pass fetches (before:
  every field of every row; after: the step's row fields of every row, `rows/step_fields.FIELDS`, fetched once a
  step for every hook, and whole rows for the reprompted ones) and builds the teacher rows with the real
  `TeacherContextBuilder` (feedback text, a demo and the final screenshot); the figure is that process's peak RSS
  (ru_maxrss). Every failed row is reprompted (`--reprompt 1.0`, the first steps of a hard task set: the worst
  case).

Screenshots are real ones of the local OSWorld desktop (LibreOffice Calc and Writer, Chrome: our task set's
solutions, step by step), or drawn ones (`--screens synthetic`) where the desktop cannot start. fp32 patches do not
fit this machine at full scale: `--sample` episodes are built and the figures scaled to `--episodes` (said so in the
output); PNG rows are built at full scale. The processor is the tiny Qwen3-VL's with Qwen3-VL's own limits.

Measured (`python -m bench.memory`, 2-core CPU with 24 GiB, 12 real screenshots of the local desktop, 1312x736
after the resize; the driver fetching the step's row fields): before, 65.1 MB a row, 125.0 GB in TransferQueue and a
328 GB driver peak (2 episodes built, 5.96 GB measured, scaled x64); after, 0.46 MB a row, 0.89 GB in TransferQueue
and a 1.71 GB driver peak, built and measured at full scale (1920 rows, 1920 teacher rows; 3 min 50 s in all).
The last line reads `recipe-scale step: X GB in TransferQueue, Y GB driver peak` (after; target <= 10 GB each).

`--smoke` (CI's check that the bench runs, seconds): one episode of 2 rows of drawn 640x360 screenshots, both stages
in this process (its peak RSS is then not the driver's alone: the figures are the bench's shape, not a measurement).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.requires import require

STEPS = 15
HISTORY = 3
SCREEN = (1920, 1080)
MAX_PIXELS = 1_003_520
PROMPT_TEXT_TOKENS = 1400  # system prompt, instruction, earlier actions (bench: filler tokens)
RESPONSE_TOKENS = 120  # one step's answer (a thought and an action)
QWEN3VL_SIZE = {"longest_edge": 16777216, "shortest_edge": 65536}
GB = 1e9
SMOKE = {"episodes": 1, "sample": 1, "screens": "synthetic", "steps": 2, "screen": "640x360"}


def _processor():
    from transformers import AutoProcessor

    from verl_cua.testing.tiny_models import build_tiny_model

    processor = AutoProcessor.from_pretrained(build_tiny_model("qwen3vl"))
    processor.image_processor.size = processor.image_processor.size.__class__(**QWEN3VL_SIZE)
    return processor


def _screens(kind: str, screen: tuple[int, int] = SCREEN) -> list:
    """Distinct `screen`-sized (1920x1080) screenshots, resized as the agent loop resizes them."""
    from verl_cua.actions.geometry import smart_resize_size

    shots = _desktop_screens() if kind == "desktop" else []
    if not shots:
        shots = _synthetic_screens(size=screen)
    size = smart_resize_size(screen, 32, 32 * 32, MAX_PIXELS)
    return [s.convert("RGB").resize(size) for s in shots]


def _desktop_screens() -> list:
    from verl_cua.envs import make_env
    from verl_cua.testing.osworld_solutions import SOLUTIONS

    shots = []
    for task in ("calc-sum-column", "writer-center-title", "chrome-open-new-tab", "calc-rename-sheet"):
        try:  # a desktop per task, the first two actions of its solution (no saving dialogs)
            env = make_env("osworld", provider="local", action_format="pyautogui")
        except Exception as exc:  # no desktop here: drawn screenshots instead
            print(json.dumps({"desktop": f"unavailable ({exc}); drawn screenshots"}), file=sys.stderr)
            return []
        try:
            shots.append(env.reset(task).screenshot)
            for action in SOLUTIONS[task][:2]:
                shots.append(env.step(action).observation.screenshot)
        except Exception as exc:  # a task that does not set up here: the others still give screenshots
            print(json.dumps({"desktop": f"{task}: {exc}"}), file=sys.stderr)
        finally:
            env.close()
    return shots


def _synthetic_screens(n: int = 12, size: tuple[int, int] = SCREEN) -> list:
    """Drawn desktops: a menu bar, a spreadsheet grid of numbers, a text document, a photo-like wallpaper strip."""
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(0)
    width, height = size
    strip = height * 5 // 6  # where the wallpaper strip starts (900 of 1080)
    shots = []
    for i in range(n):
        image = Image.new("RGB", size, (236, 236, 236))
        draw = ImageDraw.Draw(image)
        draw.rectangle((0, 0, width, 28), fill=(50, 50, 60))
        for x in range(0, width, 64):
            draw.line((x, 80, x, strip), fill=(200, 200, 200))
        for y in range(80, strip, 22):
            draw.line((0, y, width, y), fill=(200, 200, 200))
            for x in range(0, width, 64):
                if rng.random() < 0.4 + 0.04 * i:
                    draw.text((x + 4, y + 4), str(rng.randint(0, 99999)), fill=(0, 0, 0))
        for y in range(strip, height, 3):
            for x in range(0, width, 3):
                draw.point((x, y), fill=(rng.randint(0, 255), rng.randint(60, 200), rng.randint(90, 255)))
        shots.append(image)
    return shots


def _rows(processor, screens: list, episodes: int, storage: str, steps: int = STEPS):
    """Yield (field name -> serialised bytes) per row, as TransferQueue would hold them."""
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    from verl_cua.integrations.verl.agent_loop_worker import CuaAgentLoopWorker

    worker = object.__new__(CuaAgentLoopWorker)
    worker.processor, worker.tokenizer, worker.mm_processor_kwargs = processor, processor.tokenizer, None
    worker.config = {"cua": {"env": {"image_storage": storage}}}
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    start = processor.tokenizer.convert_tokens_to_ids("<|vision_start|>")
    end = processor.tokenizer.convert_tokens_to_ids("<|vision_end|>")
    im_start, im_end = (processor.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>"))
    assistant = processor.tokenizer.encode("assistant\n", add_special_tokens=False)
    per_image = (screens[0].size[0] // 32) * (screens[0].size[1] // 32)
    final_png, made = None, {}
    for episode in range(episodes):
        shots = [screens[(episode + t) % len(screens)] for t in range(steps + 1)]
        for step in range(steps):
            recent = shots[max(0, step + 1 - HISTORY) : step + 1]
            prompt = [im_start] + [7] * PROMPT_TEXT_TOKENS
            for _ in recent:
                prompt += [start] + [pad] * per_image + [end]
            prompt += [im_end, im_start, *assistant]
            response = [9] * RESPONSE_TOKENS
            output = AgentLoopOutput(
                prompt_ids=prompt, response_ids=response, response_mask=[1] * len(response),
                multi_modal_data={"images": recent}, num_turns=2, metrics={},
            )  # fmt: skip
            input_ids = torch.tensor(prompt + response, dtype=torch.int64)
            key = tuple(id(image) for image in recent)  # the same screenshots give the same stored bytes: build once
            if key not in made:
                made[key] = worker._compute_multi_modal_inputs(output, input_ids)
                made[key].pop("mm_token_type_ids", None)  # verl pops it when it computes the positions
            mm = made[key]
            if final_png is None:
                from verl_cua.integrations.verl.screenshots.compact import png_bytes

                final_png = png_bytes(shots[-1])
            extra = {
                "cua_task": f"task{episode // 8}", "cua_success": False, "cua_score": 0.0,
                "cua_actions": ["pyautogui.click(100, 200)"] * (step + 1), "cua_feedback": "",
                "cua_final_screenshot": final_png, "cua_rows": steps, "cua_anchors": ["0" * 16] * steps,
            }  # fmt: skip
            yield {
                "prompts": torch.tensor(prompt),
                "responses": torch.tensor(response),
                "response_mask": torch.ones(len(response), dtype=torch.int64),
                "loss_mask": torch.ones(len(response), dtype=torch.int64),
                "input_ids": input_ids,
                "position_ids": torch.zeros(4, len(input_ids), dtype=torch.int64),
                "rollout_log_probs": torch.zeros(len(response)),
                "multi_modal_inputs": mm,
                "extra_fields": extra,
                "uid": f"u{episode // 8}",
                "session_id": episode % 8,
            }


def _store(args) -> None:
    """Stage 1 (its own process): build the rows, write them serialised field by field; print the stored bytes."""
    processor = _processor()
    screens = _screens(args.screens, _size(args.screen))
    total, rows = 0, 0
    with open(args.out, "wb") as f:
        for row in _rows(processor, screens, args.episodes, args.storage, args.steps):
            fields = {k: pickle.dumps(v, protocol=5) for k, v in row.items()}
            total += sum(len(b) for b in fields.values())
            pickle.dump(fields, f, protocol=5)
            rows += 1
    print(json.dumps({"rows": rows, "stored_bytes": total, "screens": len(screens), "image": list(screens[0].size)}))


def _driver(args) -> None:
    """Stage 2 (its own process): the teacher pass's fetch and teacher rows; print the peak RSS."""
    from verl_cua.integrations.verl.rows.step_fields import FIELDS as STEP_FIELDS
    from verl_cua.integrations.verl.sdpo.context import TeacherContextBuilder, feedback_block

    processor = _processor()
    builder = TeacherContextBuilder(processor.tokenizer, processor)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    fetched, teacher = [], []
    with open(args.out, "rb") as f:
        while True:
            try:
                fields = pickle.load(f)
            except EOFError:
                break
            wanted = fields if args.storage == "pixel_values" else {k: fields[k] for k in STEP_FIELDS}
            row = {k: pickle.loads(v) for k, v in wanted.items()}  # what kv_batch_get brings to the driver
            if len(teacher) < args.reprompt * args.rows:
                if args.storage != "pixel_values":
                    row = {k: pickle.loads(v) for k, v in fields.items()}
                extra = row["extra_fields"]
                block = feedback_block(
                    extra["cua_actions"], 0.0, "The task is not done.", extra["cua_final_screenshot"]
                )
                built = builder.build(row["prompts"], row["responses"], row["multi_modal_inputs"], block)
                teacher.append({**row, **built})
                if args.storage != "pixel_values":
                    row = {k: row[k] for k in STEP_FIELDS}  # the whole row lives on in its teacher row only
            fetched.append(row)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"driver_peak_bytes": peak, "baseline_bytes": base, "teacher_rows": len(teacher)}))


def _size(text: str) -> tuple[int, int]:
    """`WxH` as (width, height)."""
    width, _, height = text.partition("x")
    return int(width), int(height)


def _stage(stage: str, storage: str, episodes: int, out: Path, args: argparse.Namespace, rows: int) -> dict:
    """One stage in a fresh process (its peak RSS is the stage's own), or in this one for `--smoke`; its JSON line."""
    argv = ["--stage", stage, "--storage", storage, "--episodes", str(episodes), "--out", str(out),
            "--screens", args.screens, "--reprompt", str(args.reprompt), "--rows", str(rows),
            "--steps", str(args.steps), "--screen", args.screen]  # fmt: skip
    if args.smoke:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            main(argv)
        return json.loads(printed.getvalue().strip().splitlines()[-1])
    proc = subprocess.run([sys.executable, "-m", "bench.memory", *argv], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"bench.memory {stage} {storage} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Run both storages and print one JSON line each, then the recipe-scale line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=128, help="episodes a training step (flagship: 16 tasks x 8)")
    ap.add_argument("--sample", type=int, default=2, help="episodes built with fp32 patches (scaled to --episodes)")
    ap.add_argument("--screens", choices=("desktop", "synthetic"), default="desktop")
    ap.add_argument("--reprompt", type=float, default=1.0, help="fraction of rows SDPO reprompts")
    ap.add_argument("--stage", choices=("store", "driver"), default=None)
    ap.add_argument("--storage", choices=("pixel_values", "png"), default="png")
    ap.add_argument("--out", default=None)
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--steps", type=int, default=STEPS, help="step rows an episode")
    ap.add_argument("--screen", default="x".join(map(str, SCREEN)), help="the desktop's size, WxH")
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run, in this process: {SMOKE}")
    args = ap.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    require("bench.memory", ("torch", "verl"))
    if args.stage == "store":
        _store(args)
        return 0
    if args.stage == "driver":
        _driver(args)
        return 0
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for storage, episodes in (("pixel_values", min(args.sample, args.episodes)), ("png", args.episodes)):
            out = Path(tmp) / f"{storage}.rows"
            start = time.perf_counter()
            stored = _stage("store", storage, episodes, out, args, 0)
            driver = _stage("driver", storage, episodes, out, args, stored["rows"])
            scale = args.episodes / episodes
            driver_data = driver["driver_peak_bytes"] - driver["baseline_bytes"]
            result = {
                "storage": storage,
                "episodes_built": episodes,
                "scaled_to": args.episodes,
                "rows_built": stored["rows"],
                "image": stored["image"],
                "screens": stored["screens"],
                "bytes_per_row": round(stored["stored_bytes"] / stored["rows"]),
                "transfer_queue_gb": round(stored["stored_bytes"] * scale / GB, 2),
                "driver_peak_gb": round((driver["baseline_bytes"] + driver_data * scale) / GB, 2),
                "driver_measured_gb": round(driver["driver_peak_bytes"] / GB, 2),
                "teacher_rows_built": driver["teacher_rows"],
                "seconds": round(time.perf_counter() - start, 1),
            }
            results[storage] = result
            print(json.dumps(result), flush=True)
            out.unlink()
    before, after = results["pixel_values"], results["png"]
    print(
        f"before (fp32 pixel_values, scaled from {before['episodes_built']} episodes): "
        f"{before['transfer_queue_gb']} GB in TransferQueue, {before['driver_peak_gb']} GB driver peak"
    )
    print(
        f"recipe-scale step: {after['transfer_queue_gb']} GB in TransferQueue, {after['driver_peak_gb']} GB driver peak"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
