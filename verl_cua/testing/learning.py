"""The model of the learnable CPU setting (`recipes/run_tiny_grpo_miniwob_cpu.sh`): a tiny random Qwen-VL built
locally, warm-started by SFT into click syntax only. Its answers are drawn uniformly at random over the screen,
whatever the page shows, so it starts with valid actions and no idea where to click.

    python -m verl_cua.testing.learning model [--tasks click-test] [--family qwen25vl]   # prints the model's path
    python -m verl_cua.testing.learning model --observation screenshot_a11y_tree --icl 0.6  # the reading model
    python -m verl_cua.testing.learning model --observation screenshot_a11y_tree --planner  # planner and actor

stdout holds the path alone (the quickstart captures it with $(...)); the first build's progress (step, loss,
elapsed, the seconds left) goes to stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path

FAMILY = "qwen25vl"
WARM_STEPS = 3000  # enough for clicks spread evenly over the 160x210 screen (800 leave a lopsided spread)
# With icl > 0, text-only copying first: an induction head forms after ~1,500 of these (batches of 32)
INDUCTION_STEPS = 2000
ICL_WARM_STEPS = 1000  # with icl > 0: batches of 8 (600 failed the gate: teacher success 0.19)
# The instruction of each task the warm start may show (the text only: its clicks never depend on it)
INSTRUCTIONS = {"click-test": "Click the button.", "focus-text": "Focus into the textbox."}


def learnable_model(
    tasks: tuple[str, ...] = ("click-test",),
    family: str = FAMILY,
    warm_steps: int = WARM_STEPS,
    icl: float = 0.0,
    observation: str = "screenshot",
    planner: bool = False,
) -> Path:
    """The tiny random `family` model warm-started into `pyautogui.click(x, y)` syntax (built once, then cached);
    `icl`: the share of warm-start steps in SDPO's teacher context, after `INDUCTION_STEPS` of text-only copying
    (`verl_cua.testing.warm_start`): a model whose SDPO teacher can read a demo. `observation` other than
    `screenshot`: the reading model (`verl_cua.testing.reading`: copying, then synthetic tables; no task's text).
    `planner`: the planner reading model (`verl_cua.testing.planner_reading`: CODA's planner and the actor alone,
    one model; `icl` does not apply)."""
    from verl_cua.testing.tiny_models import build_tiny_model
    from verl_cua.testing.warm_start import warm_start

    if planner:
        from verl_cua.testing.planner_reading import planner_model

        return planner_model(family, observation)
    if observation != "screenshot":
        from verl_cua.testing.reading import reading_model

        return reading_model(family, observation, icl)

    unknown = [t for t in tasks if t not in INSTRUCTIONS]
    if unknown:
        raise ValueError(f"no warm-start instruction for {', '.join(unknown)}; known: {', '.join(INSTRUCTIONS)}")
    instructions = tuple(INSTRUCTIONS[t] for t in tasks)
    induction, steps = (
        (INDUCTION_STEPS, ICL_WARM_STEPS if warm_steps == WARM_STEPS else warm_steps) if icl else (0, warm_steps)
    )
    return warm_start(
        build_tiny_model(family), steps=steps, instructions=instructions, icl=icl, induction_steps=induction
    )


def main(argv: list[str] | None = None) -> int:
    """CLI: `model` builds (or finds) the warm-started model and prints its path."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    model = sub.add_parser("model", help="build the warm-started tiny model and print its path")
    model.add_argument("--tasks", default="click-test", help=f"comma-separated, from {', '.join(INSTRUCTIONS)}")
    model.add_argument("--family", default=FAMILY)
    model.add_argument("--warm-steps", type=int, default=WARM_STEPS)
    model.add_argument("--icl", type=float, default=0.0, help="share of warm-start steps in SDPO's teacher context")
    model.add_argument("--observation", default="screenshot", help="screenshot_a11y_tree or som: the reading model")
    model.add_argument("--planner", action="store_true", help="the planner reading model (CODA's planner and actor)")
    args = ap.parse_args(argv)
    build = lambda: learnable_model(tuple(args.tasks.split(",")), args.family, args.warm_steps, args.icl,  # noqa: E731
                                    args.observation, args.planner)  # fmt: skip
    from verl_cua.testing.train_checkpoint import print_built

    return print_built("verl_cua.testing.learning", build)


if __name__ == "__main__":
    raise SystemExit(main())
