"""`verl-cua sft-data`: eval runs and training traces (any model, any action format) become multi-turn, multi-image
SFT rows in verl's format (`messages` with `<image>` placeholders, `images` as PNG bytes) for a target model.

Each kept step's parsed actions are re-rendered in the target format (`verl_cua.actions.write`), the prompts are the
agent loop's (`verl_cua.actions.conversation`, `rows=episode|step`, `history_images`) with the target format's
system prompt, and the screenshots are resized as the trainer resizes them for the target model's processor, so SFT
and RL see identical prompts. `planner` (`--planner coda`): rows of a CODA planner instead (`verl_cua.sft.planner`).
`select="judge"` keeps the episodes a judge file calls clean, CODA's rule (`verl_cua.sft.judge`).
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from verl_cua.actions import build_prompt, get_format
from verl_cua.actions.conversation import first_turn, model_image_size, observation_turn, step_prompt
from verl_cua.actions.prompts import turn_context
from verl_cua.actions.types import ActionError, GUIAction
from verl_cua.actions.write import render_action
from verl_cua.envs.trajectory import EpisodeRecord, read_run
from verl_cua.model_source import resolve_model
from verl_cua.sft import planner as sft_planner
from verl_cua.sft.card import dataset_card, write_card
from verl_cua.sft.episodes import Candidate, Step, episode_reward, load_screenshot, task_names
from verl_cua.sft.judge import judged_out, match_judgements, read_judgements

ROWS = ("episode", "step")
INVALID = ("drop", "negatives")
IMAGE = "<image>"
_REWARD = re.compile(r"reward>=(-?\d+(?:\.\d+)?)")


@dataclass
class SFTDataConfig:
    """What `verl-cua sft-data` builds; the fields are its options."""

    runs: list[str]  # eval run directories or training trace directories
    format: str  # the target model's action format
    model: str  # the target model (its processor sizes the screenshots and counts tokens)
    out: str  # the parquet file to write
    rows: str | None = None  # episode | step, as cua.env.rows (None: episode; step for a planner)
    history_images: int | None = None  # screenshots in a step prompt, as cua.env.history_images (None: 3; a planner's)
    max_pixels: int = 50176  # screenshot pixel cap, as cua.env.max_pixels
    select: str = "success"  # success | all | reward>=X | judge (with `judge`)
    invalid: str = "drop"  # drop | negatives (invalid steps written to <out>.negatives.parquet, never trained on)
    max_per_task: int | None = None  # keep at most this many episodes per task (the shortest first)
    dedup: bool = True  # one copy of episodes with the same first screenshot and the same actions
    thoughts: bool = True  # keep each step's thought text beside the re-rendered action
    seed: int = 0  # the row order's shuffle
    planner: str | None = None  # a planner spec (`coda`): planner-mode runs become that planner's step rows
    judge: str | None = None  # the judge file of select=judge (CODA's judge schema, `read_judgements`)

    def __post_init__(self) -> None:
        if self.rows is None:
            self.rows = "step" if self.planner else "episode"
        if self.history_images is None:
            self.history_images = _planner_spec(self).shown_screenshots if self.planner else 3


def validate(config: SFTDataConfig) -> None:
    """One-line errors for bad options, naming the valid values."""
    get_format(config.format)  # raises ValueError listing the formats
    if config.format == "auto":
        raise ValueError("--format must name the target model's format, not auto")
    if config.rows not in ROWS:
        raise ValueError(f"unknown rows {config.rows!r}; valid: {', '.join(ROWS)}")
    if config.invalid not in INVALID:
        raise ValueError(f"unknown invalid {config.invalid!r}; valid: {', '.join(INVALID)}")
    kind, _ = selection(config.select)
    if kind == "judge" and config.judge is None:
        raise ValueError("--select judge needs a judge file (--judge FILE)")
    if kind != "judge" and config.judge is not None:
        raise ValueError("a judge file is read only with --select judge")
    if config.planner:
        _validate_planner(config)
    if config.history_images < 1 or config.max_pixels < 1:
        raise ValueError("--history-images and --max-pixels must be positive")
    if config.max_per_task is not None and config.max_per_task < 1:
        raise ValueError("--max-per-task must be positive")
    for run in config.runs:
        if not Path(run).is_dir():
            raise FileNotFoundError(f"run directory {run} does not exist")


def _planner_spec(config: SFTDataConfig):
    """The planner spec the config's `planner` field names (an unknown name raises ValueError naming the valid ones)."""
    from verl_cua.actions.planner import get_planner_spec

    return get_planner_spec(config.planner)


def _validate_planner(config: SFTDataConfig) -> None:
    """Planner rows are the spec's layout: one row per step, the spec's screenshots, the thought kept."""
    spec = _planner_spec(config)
    if config.rows != "step":
        raise ValueError(f"--planner {spec.name} rows are one per step (the planner's context is rebuilt each step); "
                         "drop --rows episode")  # fmt: skip
    if config.history_images != spec.shown_screenshots:
        raise ValueError(f"--planner {spec.name} shows {spec.shown_screenshots} screenshots (the spec's); "
                         "drop --history-images")  # fmt: skip
    if not config.thoughts:
        raise ValueError(f"--planner {spec.name}: the thought is what the planner writes; drop --no-thoughts")


def selection(select: str) -> tuple[str, float | None]:
    """`success` | `all` | `reward>=X` | `judge` -> (kind, threshold)."""
    if select in ("success", "all", "judge"):
        return select, None
    m = _REWARD.fullmatch(select.replace(" ", ""))
    if m is None:
        raise ValueError(f"unknown select {select!r}; valid: success, all, reward>=X (e.g. reward>=0.5), "
                         "judge (with --judge FILE)")  # fmt: skip
    return "reward", float(m.group(1))


def _selected(record: EpisodeRecord, kind: str, threshold: float | None, judgement=None) -> str | None:
    """Why `record` is not selected, or None when it is; `judgement`: its judge file entry (select=judge)."""
    status = record.status
    if status in ("unfinished", "infra_failure"):
        return status
    if kind == "judge":
        why = judged_out(record, "judge", judgement)  # CODA's rule, as Stage 1's states apply it
        if why is not None:
            return why
    if kind == "success" and status != "success":
        return "not a success"
    if kind == "reward" and episode_reward(record.result or {}) < threshold:
        return f"reward below {threshold:g}"
    if not record.steps:
        return "no steps"
    return None


def convert(run: str, meta: dict[str, Any], record: EpisodeRecord, config: SFTDataConfig, processor) -> Candidate | str:
    """`record` in the target format, or the reason it cannot be (an action the format cannot express)."""
    result = record.result or {}
    screen = tuple(int(v) for v in record.steps[0].get("screen") or ())
    if len(screen) != 2:
        return "no screen size"
    image_size = model_image_size(processor, screen, config.max_pixels)
    steps, negatives = [], []
    api_result = None  # the last kept step's API result, which the next turn shows
    for line in record.steps:
        action = line.get("action") or {}
        if not line.get("valid") or not action.get("actions"):
            error = line.get("error") or "no action"
            negatives.append({"text": line.get("model_text") or "", "error": error, "after": len(steps),
                              "step": line.get("step", len(steps) + len(negatives) + 1)})  # fmt: skip
            continue
        actions = [GUIAction.from_dict(a) for a in action["actions"]]
        thought = action.get("thought") if config.thoughts else None
        try:
            text = render_action(actions, format=config.format, screen=screen, image=image_size, thought=thought)
        except ActionError as exc:
            return f"not expressible in {config.format}: {exc}"
        shot = load_screenshot(record.dir / str(line.get("screenshot")), image_size)
        if shot is None:
            return "a screenshot is missing"
        shown = {"focused_app": line.get("focused_app"), "api_result": api_result}
        shown["elements_text"] = line.get("elements_text")  # the table or marks the step read beside its screenshot
        context = turn_context(config.format, shown)
        steps.append(Step(shot, text, context, shown["elements_text"]))
        api_result = line.get("api_result")
    if not steps:
        return "no valid steps"
    instance, group = task_names(result, record.key)
    texts = "\x00".join(s.text for s in steps)
    first = hashlib.sha1(steps[0].image.tobytes()).hexdigest()
    return Candidate(
        run=run,
        key=record.key,
        task=instance,
        group=group,
        source_model=str(result.get("model") or meta.get("model") or "unknown"),
        source_format=str(record.steps[0].get("action", {}).get("format") or meta.get("format") or "unknown"),
        instruction=str(result.get("instruction") or ""),
        screen=screen,
        reward=episode_reward(result),
        steps=steps,
        negatives=negatives,
        fingerprint=hashlib.sha1(f"{first}\x00{texts}".encode()).hexdigest(),
        observation=str(meta.get("observation") or "screenshot"),
    )


def png(image: Image.Image) -> dict[str, bytes]:
    """An image cell of verl's SFT dataset (`{"bytes": PNG}`)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return {"bytes": buf.getvalue()}


def verl_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, str]], list[Any]]:
    """Chat messages with content parts -> verl's rows: text with `<image>` placeholders, and the images in order."""
    out, images = [], []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            if part["type"] == "image":
                parts.append(IMAGE)
                images.append(part["image"])
            else:
                parts.append(part["text"])
        out.append({"role": message["role"], "content": "".join(parts)})
    return out, images


def episode_rows(candidate: Candidate, format: str, image_size: tuple[int, int]) -> list[list[dict[str, Any]]]:
    """The chat messages of the rows one episode gives (one for `episode`, one per step for `step`)."""
    spec = build_prompt(format, screen=candidate.screen, image=image_size, observation=candidate.observation)
    steps = candidate.steps
    messages = first_turn(spec, candidate.instruction, steps[0].image, steps[0].context)
    for i, step in enumerate(steps):
        messages.append({"role": "assistant", "content": step.text})
        if i + 1 < len(steps):
            shown = steps[i + 1].image if spec.screenshot else None  # a11y_tree: the table alone
            messages.append(observation_turn(i + 1, None, shown, steps[i + 1].context))
    return [messages]


def step_rows(
    candidate: Candidate, format: str, image_size: tuple[int, int], history_images: int
) -> list[list[dict[str, Any]]]:
    """One row per step: the step prompt (earlier replies as text, the last screenshots) and the reply."""
    spec = build_prompt(format, screen=candidate.screen, image=image_size, observation=candidate.observation)
    rows = []
    shots = [s.image for s in candidate.steps]
    for i, step in enumerate(candidate.steps):
        replies = [s.text for s in candidate.steps[:i]]
        recent = shots[max(0, i + 1 - history_images) : i + 1]
        earlier = [s.read for s in candidate.steps[max(0, i + 1 - history_images) : i]]  # the window's older tables
        prompt = step_prompt(spec, candidate.instruction, replies, [False] * i, recent, step.context, earlier)
        rows.append([*prompt, {"role": "assistant", "content": step.text}])
    return rows


def build(config: SFTDataConfig, processor=None) -> dict[str, Any]:
    """Read the runs, select and convert episodes, write the parquet file(s) and the card; returns the card."""
    try:
        import pandas as pd
    except ImportError:
        from verl_cua.resources import install_hint

        raise ImportError(f"verl-cua sft-data writes parquet with pandas: {install_hint('verl')}") from None

    validate(config)
    if processor is None:
        processor = _processor(config.model)
    start = time.perf_counter()
    image_processor = getattr(processor, "image_processor", None)
    kind, threshold = selection(config.select)
    skipped: Counter[str] = Counter()
    candidates: list[Candidate] = []
    seen: set[str] = set()
    read_steps = 0
    loaded = [(run, *read_run(run)) for run in config.runs]
    judged = _judged(config.judge, loaded) if kind == "judge" else {}
    planner = sft_planner if config.planner else None
    convert_one = planner.convert_planner if planner else convert
    for run, meta, episodes in loaded:
        root = Path(os.path.abspath(run))
        for record in episodes.values():
            read_steps += len(record.steps)
            reason = _selected(record, kind, threshold, judged.get((root, record.key)))
            converted = reason or convert_one(run, meta, record, config, image_processor)
            if isinstance(converted, str):
                skipped[converted] += 1
                continue
            if config.dedup and converted.fingerprint in seen:
                skipped["duplicate"] += 1
                continue
            seen.add(converted.fingerprint)
            candidates.append(converted)
    kept = _cap(candidates, config.max_per_task, skipped)
    rows, negatives = [], []
    cells: dict[int, dict[str, bytes]] = {}  # one PNG per screenshot, however many step rows show it
    for c in kept:
        size = c.steps[0].image.size
        if planner:
            chats = planner.planner_rows(c, _planner_spec(config))
        elif config.rows == "episode":
            chats = episode_rows(c, config.format, size)
        else:
            chats = step_rows(c, config.format, size, config.history_images)
        for index, chat in enumerate(chats):
            messages, images = verl_messages(chat)
            cells.update((id(image), png(image)) for image in images if id(image) not in cells)
            step = c.kept[index] if planner else index if config.rows == "step" else None  # planner: the recorded step
            rows.append(_row(c, messages, [cells[id(image)] for image in images], step))
        negatives += _negative_rows(c, config) if config.invalid == "negatives" else []
    if not rows:
        raise ValueError(f"no episode was selected (--select {config.select}); skipped: {dict(skipped) or 'none'}")
    random.Random(config.seed).shuffle(rows)
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.to_parquet(out)
    if negatives:
        pd.DataFrame(negatives).to_parquet(negatives_path(out))
    card = dataset_card(config, kept, rows, negatives, skipped, processor, read_steps, time.perf_counter() - start)
    write_card(card, out)
    return card


def _judged(judge: str, loaded: list[tuple[str, dict, dict[str, EpisodeRecord]]]) -> dict[tuple[Path, str], Any]:
    """The judge file's judgements keyed by (run root, episode key); a judged episode in no run raises ValueError."""
    runs = {Path(os.path.abspath(run)): episodes for run, _meta, episodes in loaded}
    return match_judgements(read_judgements(judge), runs, judge)


def negatives_path(out: Path) -> Path:
    """Where `--invalid negatives` writes the invalid steps (never read by the SFT trainer's default config)."""
    return out.with_name(out.stem + ".negatives.parquet")


def _cap(candidates: list[Candidate], cap: int | None, skipped: Counter) -> list[Candidate]:
    """At most `cap` episodes per task, the shortest first (ties: in run order)."""
    if cap is None:
        return candidates
    by_task: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_task.setdefault(c.task, []).append(c)
    kept = []
    for group in by_task.values():
        group = sorted(group, key=lambda c: len(c.steps))
        kept += group[:cap]
        if len(group) > cap:
            skipped["over --max-per-task"] += len(group) - cap
    order = {id(c): i for i, c in enumerate(candidates)}
    return sorted(kept, key=lambda c: order[id(c)])


def _row(c: Candidate, messages: list[dict[str, str]], images: list[dict], step: int | None) -> dict[str, Any]:
    return {
        "messages": messages,
        "images": images,
        "task": c.task,
        "source_model": c.source_model,
        "source_format": c.source_format,
        "source": f"{c.run}::{c.key}",
        "reward": c.reward,
        "turns": sum(1 for m in messages if m["role"] == "assistant"),
        "step_index": -1 if step is None else step,
    }


def _negative_rows(c: Candidate, config: SFTDataConfig) -> list[dict[str, Any]]:
    """The invalid replies of an episode, each with the screen it answered (as the source model wrote them)."""
    out = []
    for n in c.negatives:
        shot = c.steps[min(n["after"], len(c.steps) - 1)].image
        out.append(
            {
                "task": c.task,
                "source": f"{c.run}::{c.key}",
                "source_format": c.source_format,
                "instruction": c.instruction,
                "text": n["text"],
                "error": n["error"],
                "images": [png(shot)],
            }
        )
    return out


def _processor(model: str):
    """The target model's processor, from its folder or cached snapshot; a model that does not resolve (offline, no
    cache) is one line at once, never transformers' minutes of hub retries."""
    source = resolve_model(model, option="--model")  # before transformers' import, which takes seconds
    if source.level == "FAIL":
        raise FileNotFoundError(f"--model {source.detail}")
    try:
        from transformers import AutoProcessor
    except ImportError:
        from verl_cua.resources import install_hint

        raise ImportError("verl-cua sft-data needs transformers for the target model's processor: "
                          f"{install_hint('verl')}") from None  # fmt: skip
    try:
        return AutoProcessor.from_pretrained(source.folder or model)
    except OSError as exc:
        raise FileNotFoundError(f"--model {model}: no processor found there ({str(exc).splitlines()[0]})") from None
