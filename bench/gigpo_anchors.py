"""GiGPO's step groups on the local OSWorld desktop: `python -m bench.gigpo_anchors [--episodes N] [--tasks A,B]`.

For each task, a group of N episodes follows the task's scripted solution (the same logical states at every step),
but like a policy, each episode leaves the mouse pointer somewhere else before each step (a random
`pyautogui.moveTo`, which the desktop's screenshot draws). Each step's screen is anchored with the exact-pixel
hash (`cua.gigpo.anchor=screenshot`), the coarse quantised thumbnail (`screen`, the default) and the
accessibility tree (`a11y`), and GiGPO's own
grouping reports `gigpo/singleton_steps` for each: steps that found no partner. The ground truth of "the same
state" is the screen with the pointer parked in a corner (exact pixels): `same_state_pairs_grouped` counts the pairs
of steps in one state that an anchor puts together (more is better), `distinct_state_pairs_merged` the pairs of
different states it merges (fewer is better). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from PIL import Image

from bench.requires import require
from verl_cua.algos.gigpo import SCREEN_GRID, gigpo_advantages, screen_anchor, screenshot_anchor, text_anchor
from verl_cua.envs import make_env
from verl_cua.testing.osworld_solutions import SOLUTIONS

DEFAULT_TASKS = "calc-sum-column,calc-rename-sheet,writer-center-title,chrome-open-new-tab"


def _anchors(shot: Image.Image) -> tuple[str, str]:
    exact = screenshot_anchor(shot.tobytes() + repr(shot.size).encode())
    return exact, screen_anchor(shot.convert("L").resize(SCREEN_GRID, Image.BOX).tobytes())


def collect(env, tasks: list[str], episodes: int, rng: random.Random, save: Path | None = None):
    """Each task's group of `episodes` on `env` (its solution, the pointer moved before each step): the group names,
    each anchor's per-episode anchors and the pointer-parked ground truth, per step."""
    groups, anchors, parked = [], {"screenshot": [], "screen": [], "a11y": []}, []
    for task in tasks:
        for _ in range(episodes):
            obs = env.reset(task)
            width, height = obs.screenshot.size
            ep = {"screenshot": [], "screen": [], "a11y": [], "parked": []}
            for t, step in enumerate(SOLUTIONS[task]):
                # the state with the pointer parked in a corner: the ground truth of "same screen"
                ep["parked"].append(_anchors(env.step("pyautogui.moveTo(2, 2)").observation.screenshot)[0])
                x, y = rng.randrange(40, width - 40), rng.randrange(40, height - 40)
                obs = env.step(f"pyautogui.moveTo({x}, {y})").observation
                exact, coarse = _anchors(obs.screenshot)
                ep["screenshot"].append(exact)
                ep["screen"].append(coarse)
                ep["a11y"].append(text_anchor(str(obs.extra.get("accessibility_tree") or "")))
                if save is not None:
                    save.mkdir(parents=True, exist_ok=True)
                    obs.screenshot.save(save / f"{task}__{len(groups)}__{t}__{x}_{y}__{ep['parked'][-1][:12]}.png")
                env.step(step)
            groups.append(task)
            parked.append(ep["parked"])
            for name in anchors:
                anchors[name].append(ep[name])
    return groups, anchors, parked


def tally(tasks: list[str], episodes: int, groups: list[str], anchors: dict, parked: list[list[str]]) -> dict:
    """GiGPO's grouping per anchor (`gigpo_advantages`' own metrics) against the ground truth: same-state pairs an
    anchor puts together, different-state pairs it merges."""
    steps = [(g, e, t) for e, g in enumerate(groups) for t in range(len(parked[e]))]
    pairs = [(a, b) for i, a in enumerate(steps) for b in steps[i + 1 :] if a[0] == b[0]]
    same = [(a, b) for a, b in pairs if parked[a[1]][a[2]] == parked[b[1]][b[2]]]
    report = {"tasks": tasks, "episodes_per_task": episodes, "steps": len(steps), "same_state_pairs": len(same)}
    for name, values in anchors.items():
        _, _, metrics = gigpo_advantages([0.0] * len(groups), groups, values)

        def key(s, values=values):
            return values[s[1]][s[2]]

        report[name] = {
            "singleton_steps": int(metrics["gigpo/singleton_steps"]),
            "step_groups": int(metrics["gigpo/step_groups"]),
            "step_group_size_mean": round(metrics["gigpo/step_group_size_mean"], 2),
            "same_state_pairs_grouped": sum(key(a) == key(b) for a, b in same),
            "distinct_state_pairs_merged": sum(key(a) == key(b) for a, b in pairs if (a, b) not in set(same)),
        }
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the groups, print GiGPO's grouping per anchor and the merged-state control as JSON (exit 2 on an unknown
    task, before any desktop starts)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4, help="episodes per task (the group)")
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None, help="a folder for the screenshots (to try other anchors offline)")
    args = ap.parse_args(argv)
    require("bench.gigpo_anchors", ("desktop_env",))  # the local OSWorld desktop, driven by OSWorld's client
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in SOLUTIONS]
    problem = f"unknown task(s) {', '.join(unknown)}" if unknown else None if tasks else "no task given"
    if problem:  # before any desktop starts
        print(f"bench.gigpo_anchors: {problem}; valid: {', '.join(sorted(SOLUTIONS))}", file=sys.stderr)
        return 2
    env = make_env("osworld", provider="local", action_format="pyautogui", require_a11y_tree=True)
    try:
        collected = collect(env, tasks, args.episodes, random.Random(args.seed), Path(args.save) if args.save else None)
    finally:
        env.close()
    print(json.dumps(tally(tasks, args.episodes, *collected), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
