"""Does a policy click where no success was? `python -m bench.recombination --model PATH [--seeds 84,116]`.

SDPO's teacher scores the student's own response token by token, conditioned on the student's prefix; a teacher
that copies a demo position by position wants the demo's token at each position whatever came before it. A student
that fits those targets becomes, in the limit, a product of per-position distributions: it recombines the digits of
different successful clicks into clicks none of them made (x's first digit from `45`, its second from `118`). GRPO
weighs whole responses by their reward and has no such pull.

This samples the policy's outputs on each layout (real Chromium pages, temperature 1) and reports:

* `actual`: the share of the samples that hit the layout's target;
* `foreign`: the share that hit no target of any of the layouts given. On the training layouts no success, so no
  SDPO demo, was ever such a click: a policy trained on those layouts puts this mass where no reward ever was;
* `positional`: the same samples recombined character by character (each position drawn from that position's
  characters across the layout's samples, the end of the text included): the policy the per-position targets lead
  to. Its hit rate equals `actual` for a policy that already ignores its prefix and falls below it for one whose
  clicks hold together;
* `ratio` = positional / actual.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.grounding import NEEDS, area_click, layouts, policy_sampler
from bench.requires import require
from verl_cua.eval.grounding import hits

SAMPLES = 128  # sampled outputs per layout
END = ""  # a text's end, drawn like a character


def positional_product(texts: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """`n` texts whose i-th character is drawn from the i-th characters (or the end) of `texts`, independently."""
    if not texts:
        raise ValueError("positional_product: no texts to recombine")
    width = max(len(t) for t in texts) + 1
    pools = [[t[i] if i < len(t) else END for t in texts] for i in range(width)]
    out = []
    for _ in range(n):
        chars = []
        for pool in pools:
            c = rng.choice(pool)
            if c == END:
                break
            chars.append(c)
        out.append("".join(chars))
    return out


def hit_rate(texts: Sequence[str], box, screen: tuple[int, int], scale: int) -> float:
    """The share of `texts` that are one click inside `box` (task-area pixels); anything else misses."""
    return sum(hits(area_click(t, screen, scale), box) for t in texts) / len(texts)


def foreign_rate(texts: Sequence[str], boxes, screen: tuple[int, int], scale: int) -> float:
    """The share of `texts` that are not one click inside any of `boxes` (invalid outputs included)."""
    return sum(not any(hits(area_click(t, screen, scale), b) for b in boxes) for t in texts) / len(texts)


def recombination(model_path: str, seeds: str, task: str = "click-test", samples: int = SAMPLES, **kw) -> dict:
    """actual, foreign, positional and positional / actual over the layouts `seeds`, with per-layout figures."""
    rng = random.Random(0)
    sample = policy_sampler(model_path, **kw)
    pages, scale = layouts(seeds, task)
    boxes = [box for _, box in pages]
    per_layout = []
    for obs, box in pages:
        texts, screen = sample(obs, obs, samples), obs.screen
        recombined = positional_product(texts, len(texts), rng)
        per_layout.append({
            "actual": hit_rate(texts, box, screen, scale),
            "foreign": foreign_rate(texts, boxes, screen, scale),
            "positional": hit_rate(recombined, box, screen, scale),
            "top": Counter(texts).most_common(10),
        })  # fmt: skip
    mean = {k: sum(p[k] for p in per_layout) / len(per_layout) for k in ("actual", "foreign", "positional")}
    ratio = mean["positional"] / mean["actual"] if mean["actual"] else None
    return {**mean, "ratio": ratio, "layouts": per_layout, "samples": samples}


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a local Hugging Face Qwen-VL folder")
    ap.add_argument("--task", default="click-test", help="a single-target MiniWoB++ task: click-test | focus-text")
    ap.add_argument("--seeds", default="84,116", help="layouts (default: the learning test's two)")
    ap.add_argument("--samples", type=int, default=SAMPLES, help="sampled outputs per layout")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="write the figures here as JSON")
    args = ap.parse_args(argv)
    require("bench.recombination", NEEDS)
    r = recombination(args.model, args.seeds, args.task, args.samples, device=args.device)
    ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}"
    print(f"bench.recombination: {args.model}, {len(r['layouts'])} {args.task} layouts x {args.samples} samples")
    print(
        f"  hit {r['actual']:.3f}; in no layout's target {r['foreign']:.3f}; recombined position by position: "
        f"hit {r['positional']:.3f} (ratio {ratio})"
    )
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model, **r}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
