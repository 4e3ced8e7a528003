"""Does a model name the element its instruction quotes? `python -m bench.reading_prior [--model PATH] [--pages N]`.

The reading design in docs/learning.md ("What is left") has the policy name an element before it clicks its mark:
```` ```python\n# "OK"\npyautogui.click(tag_3)\n``` ````. RL can only amplify a bias the model already has, so the bias
is measured first, with no RL: on synthetic set-of-marks pages of 3 to 5 one-word buttons (never a task's page), the
trainer's first prompt with the instruction `Click on the "w" button.`, and the reply prefix ```` ```python\n# " ````.
The bench counts how often `w` has the highest next-token logit among the buttons' words. The control is the same
page with the instruction `Click on the button.`, which names no word: the "quoted" word then wins only by chance.

Prints both counts, chance (the sum of 1 / buttons over the pages), and the quoted word's mean rank in each. A model
with the prior beats the control clearly; one without ties it. Default model: the reading warm start's copying stage
(`verl_cua.testing.reading.copying_model`, built and cached on first use).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from bench.requires import require

WORDS = ("ok", "yes", "no", "submit", "cancel", "next", "previous", "search", "delete", "save")
PREFIX = '```python\n# "'
SCREEN = (160, 210)


def instruction(word: str, quoted: bool) -> str:
    """The instruction shown: click-button's template quoting `word`, or the control's, which names none."""
    return f'Click on the "{word}" button.' if quoted else "Click on the button."


def pages(n: int, seed: int = 0) -> list[tuple[list[str], str]]:
    """`n` synthetic pages: (the buttons' words in mark order, the word the instruction quotes)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.sample(WORDS, rng.randrange(3, 6))
        out.append((words, rng.choice(words)))
    return out


def rank(scores: dict[str, float], word: str) -> int:
    """`word`'s 0-based rank among `scores` (highest first; ties broken by order)."""
    return sorted(scores, key=scores.get, reverse=True).index(word)


def probe(model_path: str, n: int, seed: int = 0, device: str = "cpu") -> dict[str, list[int]]:
    """Per page, the quoted word's rank among the buttons' words after `PREFIX`: under `quoted` and `control`."""
    from types import SimpleNamespace

    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from verl_cua.envs.observation import Element, with_elements
    from verl_cua.testing.log_probs import model_inputs, student_prompt

    model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch.float32).to(device).eval()
    processor = AutoProcessor.from_pretrained(model_path)
    tokenizer = processor.tokenizer
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    prefix = torch.tensor(tokenizer.encode(PREFIX, add_special_tokens=False))
    rng = random.Random(f"{seed}|boxes")
    ranks: dict[str, list[int]] = {"quoted": [], "control": [], "buttons": []}
    for words, target in pages(n, seed):
        page = [Element("button", (rng.randrange(120), rng.randrange(190), 30, 15), text=w) for w in words]
        shown, extra = with_elements("som", Image.new("RGB", SCREEN, (255, 255, 255)), page, "dom")
        firsts = {w: tokenizer.encode(w, add_special_tokens=False)[0] for w in words}
        for name in ("quoted", "control"):
            obs = SimpleNamespace(screen=SCREEN, instruction=instruction(target, name == "quoted"), screenshot=shown,
                                  extra=extra)  # fmt: skip
            prompt, mm = student_prompt(processor, obs)
            kwargs = model_inputs(model, torch.cat([prompt, prefix]), mm, pad)
            with torch.no_grad():
                logits = model(**kwargs).logits[0, -1].float().cpu()
            ranks[name].append(rank({w: logits[i].item() for w, i in firsts.items()}, target))
        ranks["buttons"].append(len(words))
    return ranks


def summary(ranks: dict[str, list[int]]) -> dict[str, float]:
    """First-place counts, chance and mean ranks of `probe`'s result."""
    n = len(ranks["buttons"])
    return {
        "pages": n,
        "quoted_first": sum(r == 0 for r in ranks["quoted"]),
        "control_first": sum(r == 0 for r in ranks["control"]),
        "chance_first": sum(1 / b for b in ranks["buttons"]),
        "quoted_mean_rank": sum(ranks["quoted"]) / n,
        "control_mean_rank": sum(ranks["control"]) / n,
        "chance_mean_rank": sum((b - 1) / 2 for b in ranks["buttons"]) / n,
    }


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a local Hugging Face Qwen-VL folder (default: the copying stage)")
    ap.add_argument("--pages", type=int, default=120, help="synthetic set-of-marks pages")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="write the ranks and the summary here as JSON")
    args = ap.parse_args(argv)
    if args.pages < 1:
        ap.error(f"--pages must be at least 1, got {args.pages}")
    require("bench.reading_prior", ("torch", "transformers"))
    if args.model is None:
        from verl_cua.testing.reading import copying_model

        args.model = str(copying_model())
    ranks = probe(args.model, args.pages, args.seed, args.device)
    s = summary(ranks)
    print(f"bench.reading_prior: {args.model}, {s['pages']} synthetic som pages of 3-5 buttons")
    print(f"  the quoted word first: {s['quoted_first']}/{s['pages']} (mean rank {s['quoted_mean_rank']:.2f})")
    print(f"  control, no word:      {s['control_first']}/{s['pages']} (mean rank {s['control_mean_rank']:.2f})")
    print(f"  chance:                {s['chance_first']:.1f}/{s['pages']} (mean rank {s['chance_mean_rank']:.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model, **ranks, "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
