"""The reading warm start: a tiny random Qwen-VL that can read an element table (or a list of marks) and copy from
it, so a CPU policy whose clicks depend on what it observes becomes learnable. A test fixture, not an agent.

It teaches the observation's syntax and copying only, never a task: every page is synthetic (random tags, words,
ids and boxes, drawn as boxes on a white screenshot), every instruction is random filler words, and every answer is
a click on a row drawn at random (`pyautogui.click(x, y)` at the row's top-left corner, which lies inside its box;
for `som`, `pyautogui.click(tag_N)` on a random mark). A model trained so starts with valid clicks on the screen's
elements and no idea which element a task wants; RL has to find that out from the reward, by reading.

Two stages, each cached beside the tiny model (`verl_cua.testing.model_cache`):
1. copying: the text-only induction sequences of `verl_cua.testing.warm_start` (an induction head forms after
   ~1,500 batches of 32): in-context copying, what pretraining gives a real model;
2. reading: `READING_STEPS` batches of `READING_BATCH` prompts built by the trainer's own prompt code (system prompt
   with the observation's guide, the screenshot, the table the env code writes), loss on the answer. With `icl`, that
   share of them are in SDPO's teacher context (`warm_start.TeacherExamples`: copy a demo's click when the block
   holds one), so SDPO's teacher can read too.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from verl_cua.testing.model_cache import checkpointer, derived_model
from verl_cua.testing.warm_start import FILLER, INDUCTION_BATCH, Progress, click_text, save_like

RECIPE_VERSION = "1"
READING_STEPS = 1000
READING_BATCH = 8
READING_LR = 3e-3
COPYING_STEPS = 2000  # text-only copying batches (warm_start's induction)
SCREEN = (160, 210)
TAGS = ("div", "button", "input_text", "label", "t", "span", "p", "a", "input_checkbox", "li", "h2", "textarea")
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def mark_text(mark: int) -> str:
    """One model turn that clicks set-of-marks mark `mark`."""
    return f"```python\npyautogui.click(tag_{mark})\n```"


def random_word(rng: random.Random) -> str:
    """A filler word or a random 2-6 letter string (half each)."""
    if rng.random() < 0.5:
        return rng.choice(FILLER)
    return "".join(rng.choice(LETTERS) for _ in range(rng.randrange(2, 7)))


def synthetic_elements(rng: random.Random, screen: tuple[int, int] = SCREEN) -> list:
    """2 to 9 random elements on a `screen`: random tags, words, ids and classes, boxes of 8 px and up inside it
    (a few containers among them, as a DOM has)."""
    from verl_cua.envs.observation import Element

    width, height = screen
    elements = []
    for _ in range(rng.randrange(2, 10)):
        x, y = rng.randrange(width - 8), rng.randrange(height - 8)
        w, h = rng.randrange(8, min(width - x, 120) + 1), rng.randrange(8, min(height - y, 60) + 1)
        text = " ".join(random_word(rng) for _ in range(rng.randrange(1, 4))) if rng.random() < 0.6 else ""
        elements.append(
            Element(
                tag=rng.choice(TAGS),
                box=(x, y, w, h),
                text=text,
                id=random_word(rng) if rng.random() < 0.4 else "",
                classes=random_word(rng) if rng.random() < 0.2 else "",
                leaf=rng.random() < 0.8,
            )
        )
    if not any(e.leaf for e in elements):  # set-of-marks needs a mark to click
        elements[-1] = replace(elements[-1], leaf=True)
    return elements


def synthetic_page(elements: list, rng: random.Random, screen: tuple[int, int] = SCREEN):
    """A white screenshot with each leaf element drawn as a filled, outlined box."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", screen, (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for e in elements:
        if e.leaf:
            x, y, w, h = e.box
            fill = tuple(rng.randrange(150, 256) for _ in range(3))
            draw.rectangle((x, y, x + w - 1, y + h - 1), fill=fill, outline=(90, 90, 90))
    return image


def reading_example(rng: random.Random, observation: str, screen: tuple[int, int] = SCREEN, budget: int = 300):
    """One synthetic turn: (instruction, screenshot as shown, the observation's `extra`, the answer text)."""
    from verl_cua.envs.observation import element_rows, marks, with_elements

    elements = synthetic_elements(rng, screen)
    shown, extra = with_elements(observation, synthetic_page(elements, rng, screen), elements, "dom", budget)
    instruction = " ".join(random_word(rng) for _ in range(rng.randrange(2, 7))).capitalize() + "."
    if observation == "som":
        answer = mark_text(rng.randrange(1, len(marks(elements)) + 1))
    else:  # a row of the table as shown (a cut table shows fewer): its top-left corner
        rows = len(element_rows(extra["elements_text"]))
        x, y, _, _ = elements[rng.randrange(max(1, min(rows, len(elements))))].box
        answer = click_text(x, y)
    return instruction, shown, extra, answer


def reading_model(family: str = "qwen25vl", observation: str = "screenshot_a11y_tree", icl: float = 0.6,
                  steps: int = READING_STEPS, seed: int = 0) -> Path:  # fmt: skip
    """The tiny random `family` model after copying and reading (module docstring); built once, then cached."""
    from verl_cua.envs.observation import check_observation, shows_elements, shows_screenshot

    if not shows_elements(check_observation(observation)) or not shows_screenshot(observation):
        raise ValueError(f"the reading warm start needs screenshot_a11y_tree or som, not {observation!r}")
    if not 0.0 <= icl <= 1.0 or steps < 1:
        raise ValueError(f"reading warm start: icl must lie in [0, 1] (got {icl}) and steps be >= 1 (got {steps})")
    copying = copying_model(family, seed)
    recipe = f"{RECIPE_VERSION}|{observation}|{steps}x{READING_BATCH}|{READING_LR}|icl={icl}|{list(TAGS)}|{seed}"
    build = lambda work: _reading(copying, work, observation, icl, steps, seed)  # noqa: E731
    return derived_model(copying, "reading", recipe, build)


def copying_model(family: str = "qwen25vl", seed: int = 0) -> Path:
    """The tiny random `family` model after the copying stage alone (module docstring, stage 1); built once, then
    cached."""
    from verl_cua.testing.tiny_models import build_tiny_model

    base = build_tiny_model(family)
    return derived_model(base, "copying", f"1|{COPYING_STEPS}x{INDUCTION_BATCH}|{list(FILLER)}|{SCREEN}|{seed}",
                         lambda work: _copying(base, work, seed))  # fmt: skip


def load_trainable(src: Path):
    """The model at `src` in float32, in training mode, and its processor."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(src, dtype=torch.float32)
    model.train()
    return model, AutoProcessor.from_pretrained(src)


def _copying(src: Path, dst: Path, seed: int) -> None:
    import torch

    from verl_cua.testing.warm_start import _induction

    torch.manual_seed(seed)
    model, processor = load_trainable(src)
    _induction(model, processor.tokenizer, COPYING_STEPS, READING_LR, SCREEN, random.Random(f"{seed}|induction"),
               src.name)  # fmt: skip
    save_like(model, src, dst)


def _reading(src: Path, dst: Path, observation: str, icl: float, steps: int, seed: int) -> None:
    import torch

    from verl_cua.actions.conversation import first_turn
    from verl_cua.actions.prompts import build_prompt, turn_context
    from verl_cua.testing.log_probs import chat_inputs
    from verl_cua.testing.warm_start import TeacherExamples, _batch_nll

    torch.manual_seed(seed)
    rng = random.Random(f"{seed}|reading")
    model, processor = load_trainable(src)
    tokenizer = processor.tokenizer
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    optim = torch.optim.AdamW(model.parameters(), lr=READING_LR, weight_decay=0.0)
    spec = build_prompt("pyautogui", screen=SCREEN, observation=observation)
    teacher = TeacherExamples(processor, SCREEN, (0, 0, *SCREEN), seed) if icl else None
    what, randoms = f"reading warm start ({observation}) of {src.name}", {"examples": rng}
    if teacher is not None:
        randoms["teacher"] = teacher.rng
    ckpt = checkpointer("reading", what, steps)
    start = ckpt.resume(model, optim, randoms)
    progress = Progress(steps, what, done=start)
    for step in range(start, steps):
        rows = []
        for _ in range(READING_BATCH):
            instruction, shown, extra, answer = reading_example(rng, observation)
            messages = first_turn(spec, instruction, shown, turn_context("pyautogui", extra))
            inputs = chat_inputs(processor, messages, [shown])
            if teacher is not None and teacher.rng.random() < icl:
                inputs, demo = teacher.example(inputs, None)  # None: the block holds no demo
                answer = answer if demo is None else click_text(*demo)
            rows.append((inputs, answer))
        loss = _batch_nll(model, tokenizer, rows, end)
        loss.backward()
        optim.step()
        optim.zero_grad()
        progress.update(step + 1, f"loss {loss.item():.3f}")
        ckpt.step(step + 1, model, optim, randoms)
    save_like(model, src, dst)
