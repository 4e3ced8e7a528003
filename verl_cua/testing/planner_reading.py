"""The planner reading warm start: one tiny random Qwen-VL that reads an element table in two roles, so a CPU run
can put CODA's planner (a thought naming an element, grounded by the stand-in executor) beside the same model acting
alone (a click's coordinates). A test fixture, not an agent.

It teaches syntax and copying only, never a task, as `verl_cua.testing.reading` does: every page is synthetic
(random tags, words, ids and boxes), every instruction random filler words without quotes. Each batch mixes
* planner rows (`PLANNER_SHARE` of them): CODA's planner context (`planner_messages`: its system prompt, the
  screenshot, the table, the `Task:` line), answered `Thought: click "NAME"` + `Action: click` for a row drawn at
  random among those whose name (text, else id) no other element shares, so the stand-in clicks that row; and
* actor rows: the trainer's own first turn (system prompt, screenshot, table), answered `pyautogui.click(x, y)` at
  that random row's top-left corner, as the reading model is.
So both roles start from valid, task-free answers, and RL has to find from the reward which element a task wants.
Built from the reading module's copying model (its stage 1), cached beside it (`verl_cua.testing.model_cache`).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from PIL import Image

from verl_cua.envs.observation import Element
from verl_cua.testing.grounding_standin import element_names
from verl_cua.testing.model_cache import checkpointer, derived_model
from verl_cua.testing.reading import (
    READING_BATCH,
    READING_LR,
    SCREEN,
    TAGS,
    copying_model,
    load_trainable,
    random_word,
    synthetic_elements,
    synthetic_page,
)
from verl_cua.testing.warm_start import Progress, click_text, save_like

RECIPE_VERSION = "2"  # 2: the table on a line of its own in the planner's turn
PLANNER_STEPS = 1000  # batches of READING_BATCH
PLANNER_SHARE = 0.5  # of each batch: planner rows (the rest: actor rows)


def element_name(element: Element) -> str:
    """What a thought calls an element: its text, else its id ("" for neither)."""
    return (element.text or element.id or "").strip()


def thought_text(name: str) -> str:
    """The planner's reply naming element `name` (the grounding stand-in clicks the element a quote names)."""
    return f'Thought: click "{name}"\nAction: click'


def planner_example(
    rng: random.Random, observation: str, screen: tuple[int, int] = SCREEN, budget: int = 300
) -> tuple[str, Image.Image, dict, Element]:
    """One synthetic page: (instruction, screenshot as shown, the observation's `extra`, the named row's element),
    the row drawn at random among the table's shown rows that have a name."""
    from verl_cua.envs.observation import element_rows, with_elements

    while True:
        elements = synthetic_elements(rng, screen)
        shown, extra = with_elements(observation, synthetic_page(elements, rng, screen), elements, "dom", budget)
        rows = elements[: min(len(element_rows(extra["elements_text"])), len(elements))]  # the rows it shows
        seen = Counter(n for e in elements for n in element_names(e))
        named = [e for e in rows if element_name(e) and seen[element_name(e).casefold()] == 1]  # one element so named
        if named:
            instruction = " ".join(random_word(rng) for _ in range(rng.randrange(2, 7))).capitalize() + "."
            return instruction, shown, extra, rng.choice(named)


def planner_model(family: str = "qwen25vl", observation: str = "screenshot_a11y_tree", steps: int = PLANNER_STEPS,
                  seed: int = 0) -> Path:  # fmt: skip
    """The tiny random `family` model after copying and the two-role reading stage (module docstring); cached."""
    if observation != "screenshot_a11y_tree":
        raise ValueError(
            f"the planner reading warm start reads element tables (screenshot_a11y_tree): got {observation!r}"
        )
    if steps < 1:
        raise ValueError(f"planner reading warm start: steps must be >= 1, got {steps}")
    copying = copying_model(family, seed)
    recipe = f"{RECIPE_VERSION}|{observation}|{steps}x{READING_BATCH}|{READING_LR}|{PLANNER_SHARE}|{list(TAGS)}|{seed}"
    build = lambda work: _train(copying, work, observation, steps, seed)  # noqa: E731
    return derived_model(copying, "planner-reading", recipe, build)


def _train(src: Path, dst: Path, observation: str, steps: int, seed: int) -> None:
    import torch

    from verl_cua.actions.conversation import first_turn
    from verl_cua.actions.planner import get_planner_spec, planner_messages
    from verl_cua.actions.prompts import build_prompt, turn_context
    from verl_cua.testing.log_probs import chat_inputs
    from verl_cua.testing.warm_start import _batch_nll

    torch.manual_seed(seed)
    rng = random.Random(f"{seed}|planner-reading")
    model, processor = load_trainable(src)
    end = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    optim = torch.optim.AdamW(model.parameters(), lr=READING_LR, weight_decay=0.0)
    actor = build_prompt("pyautogui", screen=SCREEN, observation=observation)
    planner = get_planner_spec("coda")
    what = f"planner reading warm start ({observation}) of {src.name}"
    ckpt = checkpointer("planner-reading", what, steps)
    start = ckpt.resume(model, optim, {"examples": rng})
    progress = Progress(steps, what, done=start)
    for step in range(start, steps):
        rows = []
        for _ in range(READING_BATCH):
            instruction, shown, extra, element = planner_example(rng, observation)
            if rng.random() < PLANNER_SHARE:
                messages = planner_messages(planner, instruction, [], shown, extra["elements_text"])
                answer = thought_text(element_name(element))
            else:
                messages = first_turn(actor, instruction, shown, turn_context("pyautogui", extra))
                answer = click_text(*element.box[:2])
            rows.append((chat_inputs(processor, messages, [shown]), answer))
        loss = _batch_nll(model, processor.tokenizer, rows, end)
        loss.backward()
        optim.step()
        optim.zero_grad()
        progress.update(step + 1, f"loss {loss.item():.3f}")
        ckpt.step(step + 1, model, optim, {"examples": rng})
    save_like(model, src, dst)
