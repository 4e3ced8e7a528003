"""Warm-start a tiny random model into the action syntax (`pyautogui.click(x, y)` at random points), so CPU runs
have valid and invalid actions, hits and misses, and GRPO sees reward differences. A test fixture, not an agent.

`typo_rate` makes invalid actions a property of the model rather than of the machine: that fraction of the
training answers misspell the call (`pyautogui.clack`), a single-token fork right after `pyautogui`, so the
model learns to take it about that often whatever else its random weights do.

`icl` stands in for a pretrained model's in-context ability, which SDPO's teacher relies on: that share of the steps
shows the prompt as SDPO's teacher sees it (the feedback block built by verl-cua's own `feedback_block` and
`TeacherContextBuilder`: the score, sometimes the evaluator's words, sometimes a final screenshot). In `COPY_SHARE`
of them the block holds a successful attempt's click and the answer is that click (read the demo); in the rest the
block holds no demo and the answer is a random click (a block that says nothing changes nothing). Pages and points
are synthetic: the model never sees a task's page or answer. A tiny random model does not learn to copy from the
block alone (1,000 steps of 8 examples: information +0.05 nats/token, no copies); `induction_steps` first train it
on short text-only sequences (a click line, filler words, the same click again; batches of 32) until an induction
head forms, abruptly, after ~1,500 steps: pretraining's in-context copying, the skill the teacher needs."""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

from verl_cua.testing.model_cache import checkpointer, derived_model, report_progress

RECIPE_VERSION = "4"
COPY_SHARE = 2 / 3  # icl steps whose block holds a demo to copy; the rest hold none (presence must say nothing)
FEEDBACK_TEXTS = ("", "", "1 output was not a valid action.", "The episode ended before the task was done.")
FILLER = ("the", "button", "page", "click", "score", "Step", "attempt", "screen", "text", "box", "red", "blue")
INDUCTION_BATCH = 32
ICL_BATCH = 8  # examples per optimizer step when icl > 0 (batch-1 steps at icl's lr wash the copying out)


def click_text(x: int, y: int) -> str:
    """One model turn in the pyautogui format."""
    return f"```python\npyautogui.click({x}, {y})\n```"


def typo_text(x: int, y: int) -> str:
    """The same turn with the call misspelt: the parser rejects it (`clack` is not an allowed call)."""
    return f"```python\npyautogui.clack({x}, {y})\n```"


def warm_start(
    model_dir: str | os.PathLike,
    *,
    screen: tuple[int, int] = (160, 210),
    steps: int = 200,
    lr: float = 3e-3,
    seed: int = 0,
    typo_rate: float = 0.0,
    instructions: tuple[str, ...] = ("Click the button.",),
    region: tuple[int, int, int, int] | None = None,
    icl: float = 0.0,
    induction_steps: int = 0,
) -> Path:
    """A copy of `model_dir` fine-tuned for `steps` on click turns at random points of `screen` (cached).

    `typo_rate`: the fraction of answers that misspell the call; `instructions`: the task texts drawn from;
    `region`: (left, top, right, bottom) the click targets are drawn from (default: the whole screen); `icl`: the
    share of steps in SDPO's teacher context, `induction_steps` text-only copying steps before (module docstring).
    """
    if not 0.0 <= typo_rate <= 1.0 or not instructions:
        raise ValueError(f"warm_start: typo_rate must lie in [0, 1] (got {typo_rate}) and instructions be non-empty")
    if not 0.0 <= icl <= 1.0 or induction_steps < 0 or (icl and typo_rate):
        raise ValueError(
            f"warm_start: icl must lie in [0, 1] (got {icl}), induction_steps be >= 0, and icl go without typo_rate"
        )
    if region is not None and not (0 <= region[0] < region[2] <= screen[0] and 0 <= region[1] < region[3] <= screen[1]):
        raise ValueError(f"warm_start: region {region} must be (left, top, right, bottom) inside the {screen} screen")
    src = Path(model_dir)
    recipe = f"{RECIPE_VERSION}|{src.resolve()}|{screen}|{steps}|{lr}|{seed}|{typo_rate}|{list(instructions)}"
    recipe += "" if region is None else f"|{tuple(region)}"
    recipe += f"|icl={icl}|{COPY_SHARE:.4f}|{list(FEEDBACK_TEXTS)}|batch{ICL_BATCH}" if icl else ""
    recipe += f"|induction={induction_steps}x{INDUCTION_BATCH}|{list(FILLER)}" if induction_steps else ""
    return derived_model(
        src,
        "warm",
        recipe,
        lambda work: _train(src, work, screen, steps, lr, seed, typo_rate, instructions, region, icl, induction_steps),
    )


def _page(screen: tuple[int, int], rng: random.Random):
    """A white page with a few coloured boxes, the look of a MiniWoB++ task."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", screen, (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, screen[0], 50), fill=(255, 255, 160))
    for _ in range(rng.randrange(1, 5)):
        x, y = rng.randrange(screen[0] - 20), rng.randrange(50, screen[1] - 20)
        fill = tuple(rng.randrange(256) for _ in range(3))
        draw.rectangle((x, y, x + rng.randrange(10, 60), y + rng.randrange(10, 30)), fill=fill)
    return image


def _train(
    src: Path,
    dst: Path,
    screen: tuple[int, int],
    steps: int,
    lr: float,
    seed: int,
    typo_rate: float,
    instructions: tuple[str, ...],
    region: tuple[int, int, int, int] | None,
    icl: float = 0.0,
    induction_steps: int = 0,
) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from verl_cua.actions.prompts import build_prompt

    torch.manual_seed(seed)
    rng = random.Random(seed)
    variety = random.Random(f"{seed}|variety")  # its own stream: the defaults train exactly what they always did
    processor = AutoProcessor.from_pretrained(src)
    tokenizer = processor.tokenizer
    model = AutoModelForImageTextToText.from_pretrained(src, dtype=torch.float32)
    model.train()
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    left, top, right, bottom = region or (0, 0, *screen)
    what = f"warm start of {src.name}"
    ckpt = checkpointer("warm", what, steps)
    if induction_steps and not ckpt.exists():  # a kept warm-start checkpoint already holds the copying
        _induction(model, tokenizer, induction_steps, lr, screen, random.Random(f"{seed}|induction"), src.name)
    prompts = Prompts(processor, build_prompt("pyautogui", screen=screen))
    teacher = TeacherExamples(processor, screen, (left, top, right, bottom), seed) if icl else None
    randoms = {"pages": rng, "variety": variety, **({"teacher": teacher.rng} if teacher else {})}
    start = ckpt.resume(model, optim, randoms)
    progress = Progress(steps, what, done=start)
    for step in range(start, steps):
        if teacher is not None:  # batches of ICL_BATCH, each example in the teacher's context with odds icl
            rows = []
            for _ in range(ICL_BATCH):
                inputs = prompts.inputs(variety.choice(instructions), _page(screen, rng))
                x, y = rng.randrange(left, right), rng.randrange(top, bottom)
                if teacher.rng.random() < icl:
                    inputs, (x, y) = teacher.example(inputs, (x, y))
                rows.append((inputs, click_text(x, y)))
            loss = _batch_nll(model, tokenizer, rows, end)
            loss.backward()
        else:
            image = _page(screen, rng)
            inputs = prompts.inputs(variety.choice(instructions), image)  # shared by both forks
            x, y = rng.randrange(left, right), rng.randrange(top, bottom)
            if not typo_rate:
                loss = _nll(model, tokenizer, inputs, click_text(x, y), end)
                loss.backward()
            else:  # both forks each step, weighted: the fork's odds settle at typo_rate, not at the last few draws
                loss = 0.0
                for weight, turn in ((1.0 - typo_rate, click_text(x, y)), (typo_rate, typo_text(x, y))):
                    fork = weight * _nll(model, tokenizer, inputs, turn, end, total=True)
                    fork.backward()
                    loss += fork.detach()
        optim.step()
        optim.zero_grad()
        progress.update(step + 1, f"loss {float(loss.detach() if torch.is_tensor(loss) else loss):.3f}")
        ckpt.step(step + 1, model, optim, randoms)
    save_like(model, src, dst)


def save_like(model, src: Path, dst: Path) -> None:
    """Save `model`'s weights and config into `dst` with `src`'s processor and tokenizer files."""
    model.save_pretrained(dst)
    for f in src.iterdir():
        if f.is_file() and not f.name.endswith((".safetensors", ".bin")) and f.name != "config.json":
            shutil.copy2(f, dst / f.name)


def _induction(model, tokenizer, steps: int, lr: float, screen: tuple[int, int], rng: random.Random, name: str):
    """Text-only copying: a click line, filler (sometimes another click first, as a decoy), then the same click as
    the answer; batches of `INDUCTION_BATCH`, loss on the answer. No image, no task: in-context copying only."""
    import torch

    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    what, randoms = f"in-context copying for {name}", {"induction": rng}
    ckpt = checkpointer("induction", what, steps)
    start = ckpt.resume(model, optim, randoms)
    progress = Progress(steps, what, done=start)
    for step in range(start, steps):
        rows = []
        for _ in range(INDUCTION_BATCH):
            x, y = rng.randrange(screen[0]), rng.randrange(screen[1])
            words = [rng.choice((*FILLER, str(rng.randrange(300)))) for _ in range(rng.randrange(3, 25))]
            decoy = (
                f"pyautogui.click({rng.randrange(screen[0])}, {rng.randrange(screen[1])}) "
                if rng.random() < 0.5
                else ""
            )
            turn = click_text(x, y)
            head = tokenizer.encode(f"{decoy}{' '.join(words)}\nStep 1: {' '.join(turn.split())}\n"
                                    f"{' '.join(words)}\n", add_special_tokens=False)  # fmt: skip
            rows.append((torch.tensor(head), torch.tensor(tokenizer.encode(turn, add_special_tokens=False) + [end])))
        ids, labels, mask = _right_padded(rows, end)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
        progress.update(step + 1, f"answer loss {loss.item():.3f}")  # falls abruptly once an induction head forms
        ckpt.step(step + 1, model, optim, randoms)


class TeacherExamples:
    """Warm-start prompts as SDPO's teacher sees them: the student's prompt with a feedback block, built by
    verl-cua's own `feedback_block` and `TeacherContextBuilder` (the same header, score line, image insertion and
    M-RoPE layout as in training), on synthetic pages with synthetic points only."""

    def __init__(self, processor, screen: tuple[int, int], region: tuple[int, int, int, int], seed: int):
        from verl_cua.integrations.verl.sdpo.context import TeacherContextBuilder

        self.builder = TeacherContextBuilder(processor.tokenizer, processor)
        self.screen, self.region = screen, region
        self.rng = random.Random(f"{seed}|icl")  # its own stream: the plain steps' pages and points stay the same

    def example(self, inputs: dict, point: tuple[int, int]) -> tuple[dict, tuple[int, int]]:
        """The teacher-context version of a processed student prompt, and the click it should answer with: the
        demo's click when the block holds one (`COPY_SHARE`), else `point` (the block says nothing)."""
        import torch

        from verl_cua.integrations.verl.sdpo.context import feedback_block

        rng, (left, top, right, bottom) = self.rng, self.region
        copy = rng.random() < COPY_SHARE
        answer = (rng.randrange(left, right), rng.randrange(top, bottom)) if copy else point
        demo = [click_text(*answer)] if copy else None
        final = _page(self.screen, rng) if rng.random() < 0.7 else None
        block = feedback_block(demo, rng.choice((0.0, 0.0, 1.0)), rng.choice(FEEDBACK_TEXTS), final)
        mm = {k: inputs[k] for k in ("pixel_values", "image_grid_thw")}
        built = self.builder.build(inputs["input_ids"][0], torch.zeros(0, dtype=torch.long), mm, block)
        ids = built["input_ids"][None]
        out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), **built["multi_modal_inputs"]}
        if "mm_token_type_ids" in inputs:
            out["mm_token_type_ids"] = (ids == self.builder.image_pad).to(inputs["mm_token_type_ids"].dtype)
        return out, answer


class Prompts:
    """A turn's processed prompt: the text of each instruction is tokenized once (every page has the screen's
    size, so the same number of image tokens); each step only turns its page into patches."""

    def __init__(self, processor, spec):
        self.processor, self.spec = processor, spec
        self._text: dict[str, dict] = {}

    def inputs(self, instruction: str, image) -> dict:
        """What `processor(text=[prompt], images=[image])` returns for this instruction's prompt and `image`."""
        text = self._text.get(instruction)
        if text is None:
            content = [{"type": "image"}, {"type": "text", "text": self.spec.user_text(instruction)}]
            messages = [{"role": "system", "content": self.spec.system}, {"role": "user", "content": content}]
            prompt = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            full = self.processor(text=[prompt], images=[image], return_tensors="pt")
            self._text[instruction] = {k: v for k, v in full.items() if k != "pixel_values"}
            return dict(full)
        pixels = self.processor.image_processor(images=[image], return_tensors="pt")
        if not bool((pixels["image_grid_thw"] == text["image_grid_thw"]).all()):
            raise ValueError(f"warm start: a page of size {image.size} has another image grid than the first page")
        return {**text, "pixel_values": pixels["pixel_values"]}


class Progress:
    """Lines on stderr while a model trains on the CPU: what it does first, then step, elapsed seconds, the seconds
    left (at the rate measured since this process started: a loaded machine's ETA is its own) and a note (the loss)
    at every tenth of the steps, and at least every `every_s` seconds. `done`: steps a checkpoint already holds."""

    def __init__(self, total: int, what: str, every_s: float = 30.0, done: int = 0):
        import time

        self.total, self.what, self.every_s, self._clock = total, what, every_s, time.monotonic
        self.start = self._last = self._clock()
        self.first = done
        self._next = 0
        if done:
            line = f"{what}: {total} steps on the CPU, continuing from its checkpoint at step {done}"
        else:
            line = f"{what}: {total} steps on the CPU (built once, then cached)"
        print(line, file=sys.stderr, flush=True)
        report_progress(f"{done}/{total} steps")

    def update(self, done: int, note: str = "") -> None:
        """Report `done` steps when it crosses the next tenth, ends the loop or `every_s` passed since the last line
        (with `note`, e.g. the current loss)."""
        now = self._clock()
        if done < self._next and done < self.total and now - self._last < self.every_s:
            return
        tenth = max(1, self.total // 10)
        self._next, self._last = (done // tenth + 1) * tenth, now
        elapsed = now - self.start
        ran = done - self.first
        left = elapsed / ran * (self.total - done) if ran > 0 else 0.0
        note = f", {note}" if note else ""
        status = f"{done}/{self.total} steps, {elapsed:.0f} s, about {left:.0f} s left{note}"
        print(f"{self.what}: {status}", file=sys.stderr, flush=True)
        report_progress(status)


def _right_padded(seqs: list, pad: int):
    """(prompt, answer) 1-D token tensors as one right-padded batch: ids, labels (-100 but on the answers), mask."""
    import torch

    width = max(len(prompt) + len(answer) for prompt, answer in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    labels, mask = torch.full_like(ids, -100), torch.zeros_like(ids)
    for i, (prompt, answer) in enumerate(seqs):
        n = len(prompt) + len(answer)
        ids[i, :n] = torch.cat([prompt, answer])
        labels[i, len(prompt) : n] = answer
        mask[i, :n] = 1
    return ids, labels, mask


def _batch_nll(model, tokenizer, rows: list[tuple[dict, str]], end: int):
    """The mean negative log-likelihood of each row's turn after its processed prompt, the rows right-padded into
    one batch (their images in order)."""
    import torch

    seqs = [(p["input_ids"][0], torch.tensor(tokenizer.encode(t, add_special_tokens=False) + [end])) for p, t in rows]
    ids, labels, mask = _right_padded(seqs, end)
    types = torch.zeros_like(ids)
    for i, (inputs, _) in enumerate(rows):
        types[i, : inputs["mm_token_type_ids"].shape[1]] = inputs["mm_token_type_ids"][0]
    pixels = torch.cat([inputs["pixel_values"] for inputs, _ in rows])
    grids = torch.cat([inputs["image_grid_thw"] for inputs, _ in rows])
    out = model(input_ids=ids, attention_mask=mask, mm_token_type_ids=types, pixel_values=pixels, image_grid_thw=grids,
                labels=labels)  # fmt: skip
    return out.loss


def _nll(model, tokenizer, prompt, turn: str, end: int, total: bool = False):
    """The model's negative log-likelihood of `turn` (+ end of turn) after the processed `prompt`: mean or sum."""
    import torch

    inputs = dict(prompt)  # `prompt` is left as it is for the other fork
    answer = torch.tensor([tokenizer.encode(turn, add_special_tokens=False) + [end]])
    n_prefix = inputs["input_ids"].shape[1]
    inputs["input_ids"] = torch.cat([inputs["input_ids"], answer], dim=1)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    if "mm_token_type_ids" in inputs:
        inputs["mm_token_type_ids"] = torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(answer)], dim=1)
    labels = inputs["input_ids"].clone()
    labels[:, :n_prefix] = -100
    loss = model(**inputs, labels=labels).loss
    return loss * answer.shape[1] if total else loss


def main(argv: list[str] | None = None) -> int:
    """CLI: `python -m verl_cua.testing.warm_start MODEL_DIR [--steps N]` prints the warm-started copy's path."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    from verl_cua.testing.train_checkpoint import print_built

    return print_built("verl_cua.testing.warm_start", lambda: warm_start(args.model_dir, steps=args.steps))


if __name__ == "__main__":
    raise SystemExit(main())
