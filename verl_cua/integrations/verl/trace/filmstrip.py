"""One traced episode as one image: a header (task, status, score) over a filmstrip of its screenshots, each
captioned with the step's action, its env reward and its advantage; and the same steps as a markdown table.

Pure PIL (its bundled font), so the same episode gives the same pixels on every machine with the same Pillow.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.viewer.detail import Images
from verl_cua.viewer.overlay import COLOURS, describe_step, step_actions
from verl_cua.viewer.runs import step_advantage

FRAME_HEIGHT = 256
MAX_FRAME_WIDTH = 512  # a very wide screenshot is squeezed, not left to widen the strip
MAX_FRAMES = 12  # longer episodes show evenly spaced steps (the first and the last always)
ACTION_CHARS = 40  # `type("...")` text is cut to this before the caption is fitted to the frame
GAP = 4
FONT = ImageFont.load_default(12)
HEADER_FONT = ImageFont.load_default(14)
LINE = 15
CAPTION_HEIGHT = 3 * LINE + 6  # two lines of action, one of reward and advantage
HEADER_HEIGHT = 2 * 18 + 8
BACKGROUND = (32, 32, 32)
TEXT = (235, 235, 235)
DIM = (160, 160, 160)
GOOD, BAD = (90, 200, 110), (235, 90, 80)
STATUS_COLOURS = {"success": (40, 110, 55), "failure": (130, 40, 40), "infra_failure": (150, 100, 20)}


def _number(value: Any, signed: bool = False) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    return "–" if not math.isfinite(number) else f"{number:+.2f}" if signed else f"{number:.2f}"


def _fit(text: str, width: float, font: ImageFont.FreeTypeFont) -> str:
    """`text` cut (with an ellipsis) to at most `width` pixels."""
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "…") > width:
        text = text[:-1]
    return text + "…"


def _wrap(text: str, width: float, lines: int, font: ImageFont.FreeTypeFont) -> list[str]:
    """`text` broken into at most `lines` lines of `width` pixels (characters, not words: actions have few spaces)."""
    out: list[str] = []
    while text and len(out) < lines - 1:
        cut = len(text)
        while cut > 1 and font.getlength(text[:cut]) > width:
            cut -= 1
        space = text.rfind(" ", 0, cut)
        cut = space + 1 if cut < len(text) and space > cut // 2 else cut  # break at a space when one is near
        out.append(text[:cut])
        text = text[cut:]
    if text:
        out.append(_fit(text, width, font))
    return out


def step_action_text(step: dict[str, Any], limit: int | None = ACTION_CHARS) -> str:
    """What the step did: its actions (`click(12, 40); type("hi")`), or `invalid: <parse error>`."""
    if step.get("valid") is False:
        return f"invalid: {step.get('error') or 'no action'}"
    return describe_step(step, limit)


def episode_title(episode: EpisodeRecord) -> str:
    """`<task id> · <status> · score <s> · reward <r> · <n> steps`: the header line and the logged caption."""
    result = episode.result or {}
    task_id = result.get("task_id") or episode.key
    return (
        f"{task_id} · {episode.status} · score {_number(result.get('score'))} · "
        f"reward {_number(result.get('reward'))} · {len(episode.steps)} steps"
    )


def shown_steps(count: int) -> list[int]:
    """The step indices a filmstrip shows: all of them, or `MAX_FRAMES` evenly spaced ones."""
    if count <= MAX_FRAMES:
        return list(range(count))
    return sorted({round(i * (count - 1) / (MAX_FRAMES - 1)) for i in range(MAX_FRAMES)})


def _frame(episode: EpisodeRecord, name: Any) -> Image.Image:
    """A screenshot scaled to `FRAME_HEIGHT`; a grey placeholder when it is missing or unreadable."""
    path: Path | None = Images(episode.dir, embed=False).path(episode, name)
    try:
        if path is None:
            raise OSError("no screenshot")
        with Image.open(path) as image:
            image = image.convert("RGB")
            width = min(MAX_FRAME_WIDTH, max(1, round(image.width * FRAME_HEIGHT / max(1, image.height))))
            return image.resize((width, FRAME_HEIGHT), Image.Resampling.LANCZOS)
    except (OSError, ValueError):
        frame = Image.new("RGB", (FRAME_HEIGHT, FRAME_HEIGHT), (70, 70, 70))
        ImageDraw.Draw(frame).text((8, FRAME_HEIGHT // 2 - 6), "no screenshot", fill=DIM, font=FONT)
        return frame


def _mark_actions(frame: Image.Image, step: dict[str, Any]) -> None:
    """A ring where each pointer action of the step landed (the viewer's colours), scaled from `screen` pixels."""
    screen = step.get("screen")
    if not (isinstance(screen, list) and len(screen) == 2 and min(screen) > 0):
        return
    draw = ImageDraw.Draw(frame)
    sx, sy = frame.width / screen[0], frame.height / screen[1]
    for action in step_actions(step):
        colour, x, y = COLOURS.get(str(action.get("kind"))), action.get("x"), action.get("y")
        if colour is None or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            continue
        cx, cy = x * sx, y * sy
        for radius, fill in ((9, "#000000"), (7, colour)):
            draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), outline=fill, width=3)


def _caption(draw: ImageDraw.ImageDraw, x: int, y: int, width: int, lines: list[tuple[str, tuple]]) -> None:
    for i, (text, colour) in enumerate(lines):
        draw.text((x + 2, y + 3 + i * LINE), text, fill=colour, font=FONT)


def _step_lines(episode: EpisodeRecord, index: int, width: int) -> list[tuple[str, tuple]]:
    step = episode.steps[index]
    number = step.get("step") or index + 1
    action = _wrap(f"{number}. {step_action_text(step)}", width - 4, 2, FONT)
    colour = BAD if step.get("valid") is False else TEXT
    advantage = step_advantage(episode, index)
    signed = _number(advantage, signed=True)
    adv_colour = DIM if signed == "–" else GOOD if float(advantage) > 0 else BAD if float(advantage) < 0 else DIM
    numbers = f"r {_number(step.get('reward'))}   A {signed}"
    return [(line, colour) for line in action] + [("", TEXT)] * (2 - len(action)) + [(numbers, adv_colour)]


def render_episode(episode: EpisodeRecord) -> Image.Image:
    """The episode as one RGB image: header, then one captioned frame per shown step (and the final screen)."""
    result = episode.result or {}
    frames = [(_frame(episode, episode.steps[i].get("screenshot")), i) for i in shown_steps(len(episode.steps))]
    for frame, index in frames:
        _mark_actions(frame, episode.steps[index])
    if result.get("final_screenshot"):
        frames.append((_frame(episode, result["final_screenshot"]), None))
    width = max(GAP + sum(f.width + GAP for f, _ in frames), 480)
    image = Image.new("RGB", (width, HEADER_HEIGHT + FRAME_HEIGHT + CAPTION_HEIGHT + GAP), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width - 1, HEADER_HEIGHT - 1), fill=STATUS_COLOURS.get(episode.status, (60, 60, 60)))
    draw.text((GAP + 2, 5), _fit(episode_title(episode), width - 12, HEADER_FONT), fill=TEXT, font=HEADER_FONT)
    instruction = " ".join(str(result.get("instruction") or "").split())
    draw.text((GAP + 2, 5 + 18), _fit(instruction, width - 12, HEADER_FONT), fill=TEXT, font=HEADER_FONT)
    x = GAP
    for frame, index in frames:
        image.paste(frame, (x, HEADER_HEIGHT))
        if index is None:
            score = (f"score {_number(result.get('score'))}", GOOD if episode.status == "success" else BAD)
            lines = [("final screen", TEXT), (f"end: {result.get('end_reason') or '–'}", DIM), score]
        else:
            lines = _step_lines(episode, index, frame.width)
        _caption(draw, x, HEADER_HEIGHT + FRAME_HEIGHT, frame.width, lines)
        x += frame.width + GAP
    return image


def same_size(images: list[Image.Image]) -> list[Image.Image]:
    """The images padded (right and bottom, in the strip's background) to the largest width and height."""
    size = (max((im.width for im in images), default=0), max((im.height for im in images), default=0))
    out = []
    for image in images:
        padded = Image.new("RGB", size, BACKGROUND) if image.size != size else image
        if padded is not image:
            padded.paste(image, (0, 0))
        out.append(padded)
    return out


def episode_markdown(episode: EpisodeRecord) -> str:
    """The episode's title, instruction and a table of every step: action, env reward, advantage."""
    instruction = " ".join(str((episode.result or {}).get("instruction") or "").split())
    rows = ["| step | action | reward | advantage |", "|---:|---|---:|---:|"]
    for index, step in enumerate(episode.steps):
        action = step_action_text(step, limit=120).replace("|", "\\|").replace("`", "'")
        advantage = _number(step_advantage(episode, index), signed=True)
        rows.append(f"| {step.get('step') or index + 1} | `{action}` | {_number(step.get('reward'))} | {advantage} |")
    return "\n".join([f"**{episode_title(episode)}**", "", instruction, "", *rows])
