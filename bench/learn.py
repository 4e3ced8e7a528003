"""Learning curves per advantage estimator on the real stack: `python -m bench.learn [--quick]`.

Every run is `recipes/run_tiny_grpo_miniwob_cpu.sh` (the learnable CPU setting) with `ICL=0.6`: the same
warm-started tiny Qwen-VL (click syntax and, for SDPO's teacher, in-context copying of a demo; never the answers)
trained by verl (`preset=cpu`: FSDP2 on CPU, the `hf` rollout) on MiniWoB++ in Chromium, for the same number of
steps and episodes; only the estimator and the run's seed (the order of the layouts, and the sampling) change.
GRPO is the anchor: every figure is read against GRPO's runs of the same invocation. Held-out success is measured
by verl's validation on layouts never trained on, before and after training, beside the blind baseline of those
layouts (the best a policy that never looks at the screenshot can do: the single click point that hits the most
training targets, scored on the held-out ones) and each trained policy's grounding gap (`bench.grounding`: held-out
success without a positive gap is a learned prior, not looking). Before the first SDPO run, the SDPO teacher gate
(`bench.sdpo_context`) checks that the initial model's teacher reads its context; a curve whose gate failed is
reported as such.

Writes OUT/learn.json ({"runs": [{"estimator", "seed", "success_rate": [...], "heldout_success_rate": [before,
after], "grounding": {...}, ...}], "blind": ..., "gate": ..., "initial_grounding": ..., "setting": ...}) and
OUT/learn.png, and prints a table. learn.png needs matplotlib (the `bench` extra): without it bench.learn stops
before any training and names the install command; `--no-plot` runs without the figure.
`--quick`: one seed of grpo and sdpo (about 30 minutes on the project's 2-core AVX2 machine, plus ~14 to build the
ICL model once); the full run: 3 seeds of each of `FULL` (15 runs of about 13 minutes there). A rerun with the same OUT
and setting keeps the runs already there (resume, or extend --quick to the full run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.curve import mark_blind, save, success_axes, trailing_mean
from bench.grounding import describe, grounding
from bench.requires import require
from verl_cua.envs.observation import DEFAULT_BUDGET
from verl_cua.envs.trajectory import write_json
from verl_cua.metrics_log import read_records

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "run_tiny_grpo_miniwob_cpu.sh"
HELDOUT_KEY = "val-core/verl_cua/miniwob/acc/mean@"
SUCCESS_KEY = "cua/success_rate"

# Every estimator runs the setting's KL loss to the warm start (0.05): the SDPO reference refuses one, but without it
# the tiny model's SDPO policy lost its entropy within ~20 steps and froze (docs/learning.md); `sdpo_no_kl` is the
# reference's choice, kept to show it.
NO_KL = "actor_rollout_ref.actor.use_kl_loss=false"
# estimator name in the table -> Hydra overrides on top of the setting (GRPO's)
ESTIMATORS: dict[str, tuple[str, ...]] = {
    "grpo": ("algorithm.adv_estimator=grpo",),
    "gigpo": ("algorithm.adv_estimator=gigpo",),
    "sdpo": ("algorithm.adv_estimator=sdpo",),  # the defaults: logit-level, EMA teacher, reprompted tokens
    "sdpo_no_kl": ("algorithm.adv_estimator=sdpo", NO_KL),  # the reference: no KL loss
    # the loss (and the KL term) averaged over every model token, as GRPO's token-mean is: the same step per
    # informative token as GRPO's (`reprompted`, the reference's, divides by the reprompted tokens only)
    "sdpo_all": ("algorithm.adv_estimator=sdpo", "cua.sdpo.normalize=all"),
    "sdpo_frozen": ("algorithm.adv_estimator=sdpo", "cua.sdpo.teacher=frozen"),
    "sdpo_token": ("algorithm.adv_estimator=sdpo", "cua.sdpo.loss=token"),
    # SDPO's own negative control: the teacher never sees a sibling's success (only the score and the final
    # screenshot, which the ICL model learned say nothing), so its signal is noise around 0
    "sdpo_no_demo": ("algorithm.adv_estimator=sdpo", "cua.sdpo.demo=false"),
    "sdpo_grpo": ("algorithm.adv_estimator=sdpo_grpo",),  # the paper's lambda-mix, lambda 0.9
    # CoSo (docs/algorithms.md): GRPO plus the entropy bonus on the tokens that cause the parsed action
    "coso": ("algorithm.adv_estimator=grpo", "cua.coso.enable=true"),  # lambda 0.01, the default
    "coso_paper": ("algorithm.adv_estimator=grpo", "cua.coso.enable=true", "cua.coso.coef=1.0"),  # the paper's lambda
    "sdpo+entropulse": (
        "algorithm.adv_estimator=sdpo",
        "cua.entropulse.schedule=fixed",
        "cua.entropulse.rl_steps=10",
        "cua.entropulse.sft_steps=2",
        "cua.entropulse.sft_batch_size=8",
    ),
}
QUICK = ("grpo", "sdpo")
FULL = ("grpo", "sdpo", "sdpo_no_demo", "sdpo_grpo", "gigpo")  # the rest: by name (--estimators)
GATE_LAYOUTS = 16  # held-out click-test layouts the SDPO teacher gate probes (bench.sdpo_context)
ICL = "0.6"  # the recipe's ICL for every run: a model that passes SDPO's teacher gate (docs/learning.md)
WINDOW = 5  # steps averaged at the start and the end of a curve
TRAIN_NEEDS = ("torch", "verl", "miniwob")  # the recipe's trainer and browser (bench.requires names their extras)
PLOT_NEEDS = ("matplotlib",)  # learn.png; --no-plot goes without
THRESHOLD = 0.3  # "steps to threshold": the first step whose trailing WINDOW-step mean reaches it (start: ~0.12)


def recipe_defaults(recipe: Path = RECIPE) -> dict[str, str]:
    """The recipe's settings block (`NAME=${NAME:-default}` lines): what a run uses unless told otherwise."""
    pattern = re.compile(r"^([A-Z_]+)=\$\{\1:-(.*?)\}\s*(#.*)?$")
    return {m[1]: m[2] for m in map(pattern.match, recipe.read_text().splitlines()) if m}


@dataclass
class LearningRun:
    """One training run: success per training step, held-out success before and after, its metric records."""

    success_rate: list[float]
    heldout_success_rate: list[float]
    seconds: float
    steps: list[dict]

    def window(self, k: int = WINDOW, last: bool = False) -> float:
        """Mean success over the first (or the last) `k` training steps."""
        values = self.success_rate[-k:] if last else self.success_rate[:k]
        return statistics.fmean(values)


def train(
    out: Path, *overrides: str, timeout: float = 3600, recipe: Path = RECIPE, **settings: str | int
) -> LearningRun:
    """One run of the learnable setting's recipe (or another CPU recipe with the same variables and metrics, e.g.
    the CODA one) in `out`; `settings` set its UPPERCASE variables (SEED=1, STEPS=30, LR=0, SAVE_FREQ=...),
    `overrides` are appended Hydra overrides (an estimator, a test's knobs)."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "VENV": sys.prefix, "OUT": str(out), "RAY_DEDUP_LOGS": "0"}
    env.update({key: str(value) for key, value in settings.items()})
    start = time.monotonic()
    proc = subprocess.run(["bash", str(recipe), *overrides], capture_output=True, text=True, timeout=timeout, env=env)
    seconds = time.monotonic() - start
    (out / "train.log").write_text(proc.stdout + "\n" + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"training failed (exit {proc.returncode}), log {out / 'train.log'}:\n{proc.stderr[-3000:]}")
    return read_run(out / "metrics.jsonl", seconds)


def read_run(log: Path, seconds: float = 0.0) -> LearningRun:
    """A `LearningRun` from verl's file-logger JSONL (training steps carry cua/success_rate; validations acc)."""
    records = [r["data"] for r in read_records(log)]  # each step once, whatever crashes and resumes it survived
    steps = [r for r in records if SUCCESS_KEY in r]
    heldout = [v for r in records for k, v in r.items() if k.startswith(HELDOUT_KEY)]
    return LearningRun([s[SUCCESS_KEY] for s in steps], heldout, seconds, steps)


def steps_to(curve: list[float], threshold: float, window: int = WINDOW) -> int | None:
    """The first training step (1-based) whose trailing `window`-step mean success is >= `threshold`."""
    for end in range(window, len(curve) + 1):
        if sum(curve[end - window : end]) / window >= threshold:
            return end
    return None


def run_record(estimator: str, seed: int, run: LearningRun, episodes_per_step: int) -> dict:
    """One run as it is written to learn.json."""
    return {
        "estimator": estimator,
        "seed": seed,
        "success_rate": run.success_rate,
        "heldout_success_rate": run.heldout_success_rate,
        "first_window": run.window(WINDOW),
        "last_window": run.window(WINDOW, last=True),
        "steps_to_threshold": steps_to(run.success_rate, THRESHOLD),
        "episodes_per_step": episodes_per_step,
        "seconds": run.seconds,
        "entropy": [s.get("actor/entropy") for s in run.steps],
    }


def summarise(runs: list[dict]) -> dict[str, dict]:
    """Per estimator: mean and spread of the start and end windows, steps to threshold, held-out before/after."""
    out: dict[str, dict] = {}
    for name in dict.fromkeys(r["estimator"] for r in runs):
        mine = [r for r in runs if r["estimator"] == name]
        reached = [s for s in (steps_to(r["success_rate"], THRESHOLD) for r in mine) if s is not None]
        out[name] = {
            "runs": len(mine),
            "first": _mean_sd([r["first_window"] for r in mine]),
            "last": _mean_sd([r["last_window"] for r in mine]),
            "rise": _mean_sd([r["last_window"] - r["first_window"] for r in mine]),
            "steps_to_threshold": statistics.median(reached) if reached else None,
            "reached": f"{len(reached)}/{len(mine)}",
            "heldout_before": _mean_sd([r["heldout_success_rate"][0] for r in mine if r["heldout_success_rate"]]),
            "heldout_after": _mean_sd([r["heldout_success_rate"][-1] for r in mine if r["heldout_success_rate"]]),
            "minutes": _mean_sd([r["seconds"] / 60 for r in mine]),
            "gaps": [r["grounding"] for r in mine if r.get("grounding")],
        }
    return out


def _mean_sd(values: list[float]) -> list[float] | None:
    if not values:
        return None
    return [statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0]


def print_table(summary: dict[str, dict], blind: dict, anchor: str = "grpo", initial: dict | None = None) -> None:
    """A rich table, GRPO first; the blind baseline under it."""
    from rich.table import Table

    from verl_cua.eval.summary import wide_console

    def fmt(value: list[float] | None) -> str:
        return "-" if value is None else f"{value[0]:.2f} ± {value[1]:.2f}"

    def gap(gaps: list[dict]) -> str:  # each seed's gap and its 95% interval
        return " ".join(f"{g['gap']:+.2f} [{g['gap_low']:+.2f},{g['gap_high']:+.2f}]" for g in gaps) or "-"

    table = Table(title=f"bench.learn: success, first vs last {WINDOW} steps (mean ± sd over seeds)")
    for column in ("estimator", "runs", "first", "last", "rise", f"rise - {anchor}'s", f"steps to {THRESHOLD}",
                   "held-out before", "held-out after", "grounding gap", "minutes"):  # fmt: skip
        table.add_column(column, justify="left" if column == "estimator" else "right", no_wrap="gap" in column)
    base = summary.get(anchor, {}).get("rise")
    for name in sorted(summary, key=lambda n: n != anchor):
        s = summary[name]
        to = "-" if s["steps_to_threshold"] is None else f"{s['steps_to_threshold']:g} ({s['reached']})"
        versus = "-" if base is None or name == anchor else f"{s['rise'][0] - base[0]:+.2f}"
        table.add_row(name, str(s["runs"]), fmt(s["first"]), fmt(s["last"]), fmt(s["rise"]), versus, to,
                      fmt(s["heldout_before"]), fmt(s["heldout_after"]), gap(s["gaps"]), fmt(s["minutes"]))  # fmt: skip
    console = wide_console()
    console.print(table)
    console.print(
        f"blind baseline on the held-out layouts (never looks at the screenshot): {blind['heldout_rate']:.2f} "
        f"(best single point {tuple(blind['point'])}, {blind['train_rate']:.2f} of the training layouts); "
        f"uniform random clicks: {blind['uniform_rate']:.2f}"
    )
    by_text = blind.get("by_instruction")
    if by_text:
        console.print(
            f"blind baseline conditioned on the instruction (best point per instruction text): "
            f"{by_text['heldout_rate']:.2f} ({by_text['instructions']} training instructions, "
            f"{by_text['heldout_seen']:.0%} of the held-out layouts' instructions among them)"
        )
    if initial is not None:
        console.print(f"initial model: {describe(initial)}")
    console.print(
        "grounding gap: held-out success with a layout's own screenshot minus its clicks on other layouts "
        "(bench.grounding); held-out success without a positive gap is the learned prior, not looking"
    )


def draw(runs: list[dict], blind: dict, path: Path, episodes_per_step: int) -> None:
    """learn.png: mean success per step and its spread over seeds, per estimator; held-out and blind marks."""
    fig, ax = success_axes(
        episodes_per_step, f"success rate (trailing mean of {WINDOW} steps; band: min-max over seeds)"
    )
    for name in dict.fromkeys(r["estimator"] for r in runs):
        curves = [r["success_rate"] for r in runs if r["estimator"] == name]
        length = min(len(c) for c in curves)
        steps = list(range(1, length + 1))
        smooth = [trailing_mean(c[:length], WINDOW) for c in curves]
        mean = [statistics.fmean(v) for v in zip(*smooth, strict=True)]
        low = [min(v) for v in zip(*smooth, strict=True)]
        high = [max(v) for v in zip(*smooth, strict=True)]
        (line,) = ax.plot(steps, mean, label=f"{name} ({len(curves)} seed{'s' if len(curves) > 1 else ''})")
        ax.fill_between(steps, low, high, alpha=0.15, color=line.get_color())
        after = [r["heldout_success_rate"][-1] for r in runs if r["estimator"] == name and r["heldout_success_rate"]]
        if after:
            ax.plot([length], [statistics.fmean(after)], marker="D", color=line.get_color())
    before = [r["heldout_success_rate"][0] for r in runs if r["heldout_success_rate"]]
    if before:
        ax.plot([0], [statistics.fmean(before)], marker="D", color="black", label="held-out (diamonds)")
    mark_blind(ax, blind["heldout_rate"])
    save(fig, ax, path)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"one seed of {', '.join(QUICK)}")
    ap.add_argument("--estimators", default=None, help=f"comma-separated, from {', '.join(ESTIMATORS)}")
    ap.add_argument("--seeds", type=int, default=None, help="runs per estimator (default 3; --quick: 1)")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (default: the recipe's)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a recipe variable, e.g. LR=1e-3")
    ap.add_argument("--out", default="outputs/bench_learn")
    ap.add_argument("--report", action="store_true", help="only redraw the table and learn.png from OUT/learn.json")
    ap.add_argument("--no-plot", action="store_true", help="no learn.png (no matplotlib needed): learn.json and table")
    args = ap.parse_args(argv)
    plot_needs = () if args.no_plot else PLOT_NEEDS
    if args.report:
        require("bench.learn", plot_needs)
        return report(Path(args.out), plot=not args.no_plot)
    names = args.estimators.split(",") if args.estimators else list(QUICK if args.quick else FULL)
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        valid = ", ".join(ESTIMATORS)
        print(f"bench.learn: unknown estimator(s) {', '.join(unknown)}; valid: {valid}", file=sys.stderr)
        return 2
    seeds = args.seeds or (1 if args.quick else 3)
    setting = {**recipe_defaults(), "ICL": ICL}  # every estimator starts from the model whose teacher reads a demo
    if args.steps:
        setting["STEPS"] = str(args.steps)
    setting["SAVE_FREQ"] = setting["STEPS"]  # the trained policy, for its grounding gap
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or name not in setting:
            print(
                f"bench.learn: --set wants NAME=VALUE with NAME in {', '.join(setting)}; got {item!r}", file=sys.stderr
            )
            return 2
        setting[name] = value
    require("bench.learn", (*TRAIN_NEEDS, *plot_needs))  # before the hours of training, not at the plot after them
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from verl_cua.eval.blind_baseline import blind_baseline
    from verl_cua.testing.learning import learnable_model

    tasks = tuple(setting["TASKS"].split(","))
    observation = setting.get("OBSERVATION", "screenshot")  # the reading setting: OBSERVATION=screenshot_a11y_tree
    setting["MODEL_PATH"] = str(learnable_model(tasks, icl=float(setting.get("ICL", 0)), observation=observation))
    episodes = int(setting["PROMPTS_PER_STEP"]) * int(setting["N_RESP"])
    previous = json.loads((out / "learn.json").read_text()) if (out / "learn.json").is_file() else {}
    same = previous.get("setting") == setting  # a rerun in the same OUT resumes: finished runs are kept
    runs: list[dict] = previous["runs"] if same else []
    blind = previous["blind"] if same else blind_baseline(tasks, setting["TRAIN_SEEDS"], setting["HELDOUT_SEEDS"])
    gate = previous.get("gate") if same else None
    initial = previous.get("initial_grounding") if same else None
    if initial is None:  # the starting policy's gap: what training must add to
        initial = grounding(setting["MODEL_PATH"], setting["HELDOUT_SEEDS"], tasks[0], **_observed(setting))
        print(f"bench.learn: initial model: {describe(initial)}", file=sys.stderr, flush=True)
    if gate is None and any(_is_sdpo(n) for n in names):
        gate = teacher_gate(setting["MODEL_PATH"], tasks[0], **_observed(setting))
        print(f"bench.learn: SDPO teacher gate: {_gate_line(gate)}", file=sys.stderr, flush=True)
        _write(out, setting, blind, runs, gate, initial)
    for seed in range(seeds):
        for name in names:  # seed-major: an interrupted full run still has every estimator's first seeds
            if any((r["estimator"], r["seed"]) == (name, seed) for r in runs):
                continue
            print(f"bench.learn: {name} seed {seed} ...", file=sys.stderr, flush=True)
            keys = (*(i.partition("=")[0] for i in args.set), "STEPS", "SAVE_FREQ", "MODEL_PATH")
            given = {k: setting[k] for k in keys}
            run = train(out / f"{name}-seed{seed}", *ESTIMATORS[name], **{**given, "SEED": seed})
            runs.append(run_record(name, seed, run, episodes))
            _write(out, setting, blind, runs, gate, initial)
    for record in runs:  # the trained policies' grounding gaps (also for runs an older bench.learn left without)
        if record.get("grounding") is None:
            record["grounding"] = trained_grounding(out / f"{record['estimator']}-seed{record['seed']}", setting)
            _write(out, setting, blind, runs, gate, initial)
    return report(out, plot=not args.no_plot)


def trained_grounding(run_dir: Path, setting: dict, planner: bool = False) -> dict | None:
    """The grounding gap of a run's final policy on the held-out layouts (its checkpoint merged by verl's model
    merger into run_dir/model; `planner`: a CODA planner, its thoughts played by the grounding stand-in); None when
    the run left no checkpoint."""
    done = run_dir / "grounding.json"
    if done.is_file():  # measured already: a resumed bench.learn does not sample it again
        return json.loads(done.read_text())
    actor = run_dir / "checkpoints" / f"global_step_{setting['STEPS']}" / "actor"
    if not actor.is_dir():
        return None
    model = run_dir / "model"
    if not (model / "config.json").is_file():
        merge = ["-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor)]
        subprocess.run([sys.executable, *merge, "--target_dir", str(model)], check=True, capture_output=True)
    task = setting["TASKS"].split(",")[0]
    result = grounding(str(model), setting["HELDOUT_SEEDS"], task, **_observed(setting), planner=planner)
    print(f"bench.learn: {run_dir.name}: {describe(result)}", file=sys.stderr, flush=True)
    write_json(done, result)
    return result


def _observed(setting: dict) -> dict:
    """`bench.grounding`'s observation arguments for the setting: what its policies read (and the swap swaps)."""
    tokens = int(setting.get("OBSERVATION_TOKENS", DEFAULT_BUDGET))
    return {"observation": setting.get("OBSERVATION", "screenshot"), "tokens": tokens}


def _is_sdpo(name: str) -> bool:
    """Whether the estimator's overrides pick sdpo or sdpo_grpo (its curve is read only past the teacher gate)."""
    return any(o.startswith("algorithm.adv_estimator=sdpo") for o in ESTIMATORS[name])


def teacher_gate(model: str, task: str, layouts: int = GATE_LAYOUTS, **observed) -> dict:
    """`bench.sdpo_context`'s gate on the runs' initial model (`observed`: what its prompts show): its mean figures
    and what fails (empty: it passes)."""
    from bench.sdpo_context import gate_failures, probe

    result = probe(model, layouts, task=task, **observed)
    return {"means": {k: statistics.fmean(v) for k, v in result.items()}, "failures": gate_failures(result)}


def _gate_line(gate: dict) -> str:
    from bench.sdpo_context import gate_verdict

    means = ", ".join(f"{k} {v:+.2f}" for k, v in gate["means"].items())
    return f"{gate_verdict(gate['failures'])} ({means})"


def report(out: Path, plot: bool = True) -> int:
    """The table and learn.png (unless not `plot`) from OUT/learn.json (what a run wrote, interrupted or not)."""
    try:
        record = json.loads((out / "learn.json").read_text())
        setting = record["setting"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"bench.learn: --report reads {out / 'learn.json'}, which a run writes: {exc!r}", file=sys.stderr)
        return 2
    figure = out / "learn.png"
    if plot:
        episodes = int(setting["PROMPTS_PER_STEP"]) * int(setting["N_RESP"])
        draw(record["runs"], record["blind"], figure, episodes)
    print_table(summarise(record["runs"]), record["blind"], initial=record.get("initial_grounding"))
    gate = record.get("gate")
    if gate is not None:
        verdict = "" if not gate["failures"] else " -- the SDPO curves above are not evidence about SDPO"
        print(f"SDPO teacher gate on the initial model: {_gate_line(gate)}{verdict}")
    print(f"bench.learn: {out / 'learn.json'}" + (f", {figure}" if plot else " (no learn.png: --no-plot)"))
    return 0


def _write(
    out: Path, setting: dict, blind: dict, runs: list[dict], gate: dict | None = None, initial: dict | None = None
) -> dict:
    summary = summarise(runs)
    record = {"setting": setting, "blind": blind, "summary": summary, "runs": runs, "gate": gate}
    record["initial_grounding"] = initial
    write_json(out / "learn.json", record)  # atomic: a kill mid-write must not lose the finished runs it resumes from
    return summary


if __name__ == "__main__":
    sys.exit(main())
