"""Does a trained policy look at the screenshot? `python -m bench.grounding [--model PATH] [--seeds A-B]`.

Held-out success alone cannot tell looking from a learned prior: every click-test layout has the same instruction,
so a policy that clicks where buttons usually are scores well without reading the screen. On held-out MiniWoB++
layouts (real Chromium screenshots; targets from the DOM) this samples the policy's clicks and reports:

* `own`: the share of a layout's own clicks that hit its target (the held-out success of these samples);
* `cross`: the share of the clicks the policy made on *other* layouts that hit this layout's target;
* `gap` = own - cross, with a bootstrap interval over layouts. A policy that never looks makes the same clicks on
  every layout, so its gap is 0 whatever its spread; a positive gap is evidence of looking;
* `swap`: the layout's prompt with another layout's observation (its screenshot, and with `--observation` other
  than `screenshot` its element table or marks), scored on this layout (a policy that looks falls to `cross`, a
  blind one stays at `own`), and `swap drop` = own - swap.

An output is played on the layout it is scored on: with `--observation som`, a mark it names (`tag_N`) lands on
that layout's mark N, so `cross` and `swap` are measured in mark space (naming the same mark everywhere has a gap of
0, as clicking the same point does).

Clicks are scored geometrically (`verl_cua.eval.grounding`: the env's click point, `(x + 0.5) / scale`, inside the
target's box), which is what the page does (a test holds the two to agree). Held-out success without a positive gap
is what docs/learning.md calls the learned prior. `bench.learn` runs this on every trained policy.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.requires import require
from verl_cua.envs.base import Observation
from verl_cua.envs.observation import DEFAULT_BUDGET
from verl_cua.eval.grounding import Box, Click, area_point, describe, gap_interval, hits, own_cross

NEEDS = ("torch", "verl", "miniwob")  # the policy (transformers on torch, verl's processor) and the pages
SAMPLES = 4  # sampled clicks per layout (temperature 1, as verl's validation samples them)
MAX_TOKENS = 24  # tokens a sampled turn may take: the CPU recipes' cua.action.max_tokens_per_step


def area_click(text: str, screen: tuple[int, int], scale: int, marks: dict | None = None) -> Click:
    """The task-area point a pyautogui output clicks (MiniWoB++ clicks a pixel's centre; `marks`: the set-of-marks
    centres its observation showed), or None unless the output is exactly one click."""
    from verl_cua.actions import parse_action

    parsed = parse_action(text, format="pyautogui", screen=screen, marks=marks)
    if not parsed.valid or len(parsed.actions) != 1 or parsed.actions[0].kind != "click":
        return None
    return area_point(parsed.actions[0].x, parsed.actions[0].y, scale)


def planner_click(text: str, obs: Observation, scale: int) -> Click:
    """The task-area point a CODA planner's reply clicks on `obs` when the grounding stand-in executes its thought
    (the element the thought names, at its centre), or None unless that is a click (an `ANS` answer clicks nothing,
    as in training, where it ends the episode without the executor)."""
    from verl_cua.actions.planner import get_planner_spec, split_plan
    from verl_cua.testing.grounding_standin import choose_action

    plan = split_plan(text, get_planner_spec("coda"))
    if plan.answer is not None:
        return None
    action = choose_action(plan.thought, obs.extra.get("elements") or [])
    return None if action.kind != "click" else area_point(action.x, action.y, scale)


def planner_prompt(processor, obs: Observation, shown: Observation | None = None) -> tuple[Any, dict]:
    """The CODA planner's first prompt for `obs` as the planner loop builds it (its system prompt, the screenshot,
    the element table, the Task line), `shown`'s screenshot and table in place of `obs`'s: (input_ids, images)."""
    from verl_cua.actions.planner import get_planner_spec, planner_messages
    from verl_cua.testing.log_probs import chat_inputs

    shown = obs if shown is None else shown
    spec = get_planner_spec("coda")
    messages = planner_messages(spec, obs.instruction, [], shown.screenshot, shown.extra.get("elements_text"))
    inputs = chat_inputs(processor, messages, [shown.screenshot])
    return inputs["input_ids"][0], {k: inputs[k] for k in ("pixel_values", "image_grid_thw") if k in inputs}


def derangement(n: int, seed: int = 0) -> list[int]:
    """A permutation of range(n) (n >= 2) that moves every index: whose observation each layout gets in the swap."""
    rng = np.random.default_rng(seed)
    shift = int(rng.integers(1, n))
    order = rng.permutation(n)
    out = [0] * n
    for i in range(n):
        out[order[i]] = int(order[(i + shift) % n])
    return out


def policy_sampler(
    model_path: str, device: str = "cpu", seed: int = 0, planner: bool = False, max_tokens: int = MAX_TOKENS
) -> Callable[[object, object, int], list[str]]:
    """`sample(obs, shown, n)`: n of the policy's outputs (temperature 1, no top-k/top-p) for the prompt of `obs`
    showing the observation `shown` (its screenshot and table), as verl's validation samples them; `planner`: the
    CODA planner's prompt (`planner_prompt`) instead of the actor's."""
    import torch
    from transformers import AutoModelForImageTextToText
    from verl.utils import hf_processor, hf_tokenizer

    from verl_cua.testing.log_probs import model_inputs, student_prompt

    tokenizer, processor = hf_tokenizer(model_path), hf_processor(model_path)
    model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch.float32).to(device).eval()
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    torch.manual_seed(seed)

    def sample(obs, shown, n: int) -> list[str]:
        prompt, mm = (planner_prompt if planner else student_prompt)(processor, obs, shown)
        kwargs = model_inputs(model, prompt, mm, image_pad)
        with torch.no_grad():
            out = model.generate(
                **kwargs, max_new_tokens=max_tokens, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                num_return_sequences=n,
            )  # fmt: skip
        return tokenizer.batch_decode(out[:, kwargs["input_ids"].shape[1] :], skip_special_tokens=True)

    return sample


def layouts(seeds: str, task: str = "click-test", observation: str = "screenshot", tokens: int = DEFAULT_BUDGET,
            ) -> tuple[list[tuple[object, Box]], int]:  # fmt: skip
    """Each layout's first observation (real Chromium; `observation`: OSWorld's type, its table trimmed to `tokens`)
    and its target's box in task-area pixels; the screenshot's scale."""
    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.miniwob_targets import target_box
    from verl_cua.envs.task_sets import resolve_tasks

    env = MiniWoBEnv(task, observation=observation, observation_tokens=tokens)
    pages = []
    try:
        for ref in resolve_tasks("miniwob", [task], seeds):
            obs = env.reset(ref.task)
            pages.append((obs, target_box(env, task)))
    finally:
        env.close()
    return pages, env.scale


def sample_clicks(
    model_path: str, seeds: str, task: str = "click-test", samples: int = SAMPLES, device: str = "cpu", seed: int = 0,
    observation: str = "screenshot", tokens: int = DEFAULT_BUDGET, planner: bool = False, max_tokens: int = MAX_TOKENS,
) -> dict:  # fmt: skip
    """The policy's sampled outputs per layout with its own observation and with a swapped one (another layout's
    screenshot and table under this layout's task), the pages and the targets (`planner`: a CODA planner's)."""
    sample = policy_sampler(model_path, device, seed, planner, max_tokens)
    pages, scale = layouts(seeds, task, observation, tokens)
    swap = derangement(len(pages), seed)
    return {
        "pages": [obs for obs, _ in pages],
        "scale": scale,
        "boxes": [box for _, box in pages],
        "own": [sample(obs, obs, samples) for obs, _ in pages],
        "swap": [sample(obs, pages[j][0], samples) for (obs, _), j in zip(pages, swap, strict=True)],
        "swap_from": swap,
    }


def actor_click(text: str, obs: Observation, scale: int) -> Click:
    """The task-area point an actor's pyautogui output clicks on `obs` (its marks resolve on `obs`'s)."""
    return area_click(text, obs.screen, scale, obs.extra.get("marks"))


def text_hit_matrix(
    texts: list[list[str]], pages: list, boxes: list[Box], scale: int, play: Callable = actor_click
) -> np.ndarray:
    """H[i, j]: the share of layout j's outputs that hit layout i's target when played on layout i. An output is
    resolved on the layout it is scored on: a mark (`tag_N`, set-of-marks) lands on that layout's mark N, and a
    planner's thought (`play=planner_click`) on the element of that name there, so a policy that names the same mark
    or element everywhere has a gap of 0, as one that clicks the same point does."""
    return np.array([
        [np.mean([hits(play(t, obs, scale), box) for t in mine]) if mine else 0.0 for mine in texts]
        for obs, box in zip(pages, boxes, strict=True)
    ])  # fmt: skip


def grounding(model_path: str, seeds: str, task: str = "click-test", samples: int = SAMPLES, **kw) -> dict:
    """own, cross, gap (with its interval), swap and swap drop of the policy at `model_path` on layouts `seeds`
    (`kw`: device, seed, observation, tokens, planner: a CODA planner whose thoughts the grounding stand-in plays)."""
    drawn = sample_clicks(model_path, seeds, task, samples, **kw)
    pages, boxes, scale = drawn["pages"], drawn["boxes"], drawn["scale"]
    play = planner_click if kw.get("planner") else actor_click
    result = gap_interval(text_hit_matrix(drawn["own"], pages, boxes, scale, play))
    swapped = text_hit_matrix(drawn["swap"], pages, boxes, scale, play)  # layout i's task, another's observation
    result["swap"] = own_cross(swapped)[0]
    result["swap_drop"] = result["own"] - result["swap"]
    result["samples"] = samples  # gap_interval already counts the layouts
    return result


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a local Hugging Face Qwen-VL folder (default: the learnable one)")
    ap.add_argument("--task", default="click-test", help="a single-target MiniWoB++ task: click-test | focus-text")
    ap.add_argument("--seeds", default="100000-100063", help="held-out layouts (the learnable setting's)")
    ap.add_argument("--samples", type=int, default=SAMPLES, help="sampled clicks per layout")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--observation", default="screenshot", help="what the policy reads (cua.env.observation)")
    ap.add_argument("--observation-tokens", type=int, default=DEFAULT_BUDGET)
    ap.add_argument("--planner", action="store_true", help="a CODA planner (its thoughts played by the stand-in)")
    ap.add_argument("--out", default=None, help="write the figures here as JSON")
    args = ap.parse_args(argv)
    require("bench.grounding", NEEDS)
    if args.model is None:
        from verl_cua.testing.learning import learnable_model

        args.model = str(learnable_model((args.task,), observation=args.observation, planner=args.planner))
    g = grounding(args.model, args.seeds, args.task, args.samples, device=args.device, observation=args.observation,
                  tokens=args.observation_tokens, planner=args.planner)  # fmt: skip
    print(f"bench.grounding: {args.model}, {g['layouts']} {args.task} layouts x {args.samples} clicks")
    print(f"  {describe(g)}")
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model, **g}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
