"""CODA's planner against the same model acting alone, seed for seed: `python -m bench.coda [--seeds 2] [--steps 60]`.

Both arms start from one model, the planner reading model (`verl_cua.testing.planner_reading`: task-free warm
start in both roles), and run on MiniWoB++ in Chromium with the page's element table beside the screenshot
(`screenshot_a11y_tree`), with the same steps, layouts, group size, learning rate and KL:
* `grpo_alone`: `recipes/run_tiny_grpo_miniwob_cpu.sh`, GRPO on the model's own `pyautogui.click(x, y)`;
* `coda`: `recipes/run_tiny_coda_miniwob_cpu.sh` (MODE=online, CODA Stage 1 as episodes): GRPO on the planner's
  thought tokens only, the grounding stand-in executing each thought (it clicks the element the thought names; a
  stand-in, not a model).
Both use CODA's loss knobs (k3 KL, seq-mean-token-mean). GRPO acting alone is the anchor. Held-out success (verl's
validation on layouts never trained on, before and after) sits beside the blind baseline (the best a policy that
never reads the page can do) and each trained policy's grounding gap (`bench.grounding`; the planner's thoughts are
played by the stand-in on the layout they are scored on, so naming the same element everywhere has a gap of 0).

Writes OUT/coda.json (bench.learn's record layout) and OUT/coda.png, and prints bench.learn's table. About 12
minutes a run on the project's 2-core machine, plus ~18 to build the model once. A rerun with the same OUT and
setting keeps the runs already there.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from bench.grounding import describe, grounding, planner_click
from bench.learn import (
    PLOT_NEEDS,
    ROOT,
    TRAIN_NEEDS,
    _observed,
    draw,
    print_table,
    recipe_defaults,
    run_record,
    summarise,
    train,
    trained_grounding,
)
from bench.requires import require
from verl_cua.envs.task_sets import parse_seeds
from verl_cua.envs.trajectory import write_json
from verl_cua.eval.grounding import hits
from verl_cua.testing.planner_reading import element_name

CODA_RECIPE = ROOT / "recipes" / "run_tiny_coda_miniwob_cpu.sh"
ALONE_RECIPE = ROOT / "recipes" / "run_tiny_grpo_miniwob_cpu.sh"
# CODA's GRPO knobs, for both arms (the CODA recipe sets them itself)
CODA_LOSS = (
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
    "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
)
# arm -> (recipe, whether it is a planner, Hydra overrides)
ARMS: dict[str, tuple[Path, bool, tuple[str, ...]]] = {
    "grpo_alone": (ALONE_RECIPE, False, CODA_LOSS),
    "coda": (CODA_RECIPE, True, ()),
}
ANCHOR = "grpo_alone"
SETTING = {"TASKS": "click-button", "OBSERVATION": "screenshot_a11y_tree", "OBSERVATION_TOKENS": "300"}
# MAX_STEPS stays 1 (both recipes' default): above it, CODA's step rows would give it more rows and updates a step
SHARED = ("TASKS", "OBSERVATION", "OBSERVATION_TOKENS", "TRAIN_SEEDS", "HELDOUT_SEEDS", "PROMPTS_PER_STEP", "N_RESP",
          "PPO_MINI_BATCH", "LR", "KL_COEF", "STEPS", "HELDOUT_SAMPLES")  # fmt: skip


def setting_for(steps: int | None = None, sets: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """The variables both arms run with: the GRPO recipe's defaults for `SHARED`, this bench's `SETTING`, then
    `steps` and `sets` (NAME=VALUE); a name outside SHARED raises ValueError naming the valid ones."""
    defaults = recipe_defaults(ALONE_RECIPE)
    setting = {name: defaults[name] for name in SHARED} | SETTING
    if steps:
        setting["STEPS"] = str(steps)
    for item in sets:
        name, sep, value = item.partition("=")
        if not sep or name not in SHARED:
            raise ValueError(f"--set wants NAME=VALUE with NAME in {', '.join(SHARED)}; got {item!r}")
        setting[name] = value
    setting["SAVE_FREQ"] = setting["STEPS"]  # the trained policy, for its grounding gap
    return setting


QUOTED = re.compile(r'"([^"]+)"')
BASELINE_TRAIN = 200  # training layouts the fixed-name baseline is fitted on


def thought(name: str) -> str:
    """A planner reply naming element `name` (the form the warm start writes)."""
    return f'Thought: click "{name}"\nAction: click'


def name_rates(pages: list, scale: int, names: list[str | None]) -> float:
    """The share of `pages` (obs, target box) whose target the stand-in hits for a thought naming `names[i]`."""
    if not pages:
        return 0.0
    hit = [
        n is not None and hits(planner_click(thought(n), obs, scale), box)
        for (obs, box), n in zip(pages, names, strict=True)
    ]
    return sum(hit) / len(pages)


def name_baselines(train: list, heldout: list, scale: int) -> dict:
    """The planner arm's references through the stand-in, on the held-out layouts: `fixed`, the single name that hits
    the most training targets (a planner that reads neither the page nor the instruction: the planner's blind
    baseline); `quoted`, the name the instruction quotes (one that reads the instruction, never the page: on
    click-button it is the ceiling the stand-in's grounding gives, not a floor)."""
    candidates = sorted({n for obs, _ in train for e in obs.extra.get("elements") or [] if (n := element_name(e))})
    rates = {n: name_rates(train, scale, [n] * len(train)) for n in candidates}
    best = max(rates, key=lambda n: (rates[n], n), default=None)
    quoted = [m[1] if (m := QUOTED.search(obs.instruction)) else None for obs, _ in heldout]
    return {
        "fixed_name": best,
        "fixed_train_rate": rates.get(best, 0.0),
        "fixed_heldout_rate": name_rates(heldout, scale, [best] * len(heldout)),
        "quoted_heldout_rate": name_rates(heldout, scale, quoted),
    }


def measure_name_baselines(setting: dict) -> dict:
    """`name_baselines` on the setting's layouts (real Chromium, the setting's observation)."""
    from bench.grounding import layouts

    task, observed = setting["TASKS"].split(",")[0], _observed(setting)
    train_seeds = ",".join(str(s) for s in parse_seeds(setting["TRAIN_SEEDS"])[:BASELINE_TRAIN])
    train, scale = layouts(train_seeds, task, observed["observation"], observed["tokens"])
    heldout, _ = layouts(setting["HELDOUT_SEEDS"], task, observed["observation"], observed["tokens"])
    return name_baselines(train, heldout, scale)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2, help="runs per arm (the same seeds for both)")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (default: the recipe's)")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, from {', '.join(ARMS)}")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a shared recipe variable")
    ap.add_argument("--out", default="outputs/bench_coda")
    ap.add_argument("--no-plot", action="store_true", help="no coda.png (no matplotlib needed)")
    args = ap.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    try:
        if unknown:
            raise ValueError(f"unknown arm(s) {', '.join(unknown)}; valid: {', '.join(ARMS)}")
        setting = setting_for(args.steps, args.set)
    except ValueError as exc:
        print(f"bench.coda: {exc}", file=sys.stderr)
        return 2
    plot_needs = () if args.no_plot else PLOT_NEEDS
    require("bench.coda", (*TRAIN_NEEDS, *plot_needs))
    from verl_cua.eval.blind_baseline import blind_baseline
    from verl_cua.testing.planner_reading import planner_model

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    setting["MODEL_PATH"] = str(planner_model(observation=setting["OBSERVATION"]))
    record_path = out / "coda.json"
    previous = json.loads(record_path.read_text()) if record_path.is_file() else {}
    same = previous.get("setting") == setting
    runs: list[dict] = previous["runs"] if same else []
    tasks = tuple(setting["TASKS"].split(","))
    blind = previous["blind"] if same else blind_baseline(tasks, setting["TRAIN_SEEDS"], setting["HELDOUT_SEEDS"])
    initial = previous.get("initial_grounding") if same else None
    names = previous.get("name_baselines") if same else None
    if names is None:
        names = measure_name_baselines(setting)
    if initial is None:  # the starting model's gap in each role
        initial = {
            arm: grounding(
                setting["MODEL_PATH"], setting["HELDOUT_SEEDS"], tasks[0], **_observed(setting), planner=ARMS[arm][1]
            )  # fmt: skip
            for arm in ARMS
        }
        for arm, gap in initial.items():
            print(f"bench.coda: initial model as {arm}: {describe(gap)}", file=sys.stderr, flush=True)
    write = lambda: write_json(record_path, {"setting": setting, "blind": blind, "runs": runs,  # noqa: E731
                                             "summary": summarise(runs), "initial_grounding": initial,
                                             "name_baselines": names})  # fmt: skip
    write()
    episodes = int(setting["PROMPTS_PER_STEP"]) * int(setting["N_RESP"])
    for seed in range(args.seeds):
        for arm in arms:  # seed-major: an interrupted run still has both arms of its first seeds
            if any((r["estimator"], r["seed"]) == (arm, seed) for r in runs):
                continue
            recipe, planner, overrides = ARMS[arm]
            print(f"bench.coda: {arm} seed {seed} ...", file=sys.stderr, flush=True)
            settings = {k: v for k, v in setting.items()} | {"SEED": seed, "MODE": "online"}
            run = train(out / f"{arm}-seed{seed}", *overrides, recipe=recipe, **settings)
            record = run_record(arm, seed, run, episodes)
            record["grounding"] = trained_grounding(out / f"{arm}-seed{seed}", setting, planner=planner)
            runs.append(record)
            write()
    if not args.no_plot:
        draw(runs, blind, out / "coda.png", episodes)
    print_table(summarise(runs), blind, anchor=ANCHOR)
    print(
        f"the planner's references through the stand-in on the held-out layouts: a fixed name "
        f"({names['fixed_name']!r}, fitted on {BASELINE_TRAIN} training layouts) {names['fixed_heldout_rate']:.2f} "
        f"(its blind baseline); the instruction's quoted name {names['quoted_heldout_rate']:.2f} (reads the "
        "instruction, never the page)"
    )
    print(
        "for coda the grounding gap is the planner's: whether its thought depends on the layout it was given "
        "(the instruction or the table); the page is read by the stand-in"
    )
    for arm, gap in initial.items():
        print(f"initial model as {arm}: {describe(gap)}")
    print(f"bench.coda: {record_path}" + ("" if args.no_plot else f", {out / 'coda.png'}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
