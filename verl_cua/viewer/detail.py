"""One task's detail section: the runs side by side, step by step, with the action drawn over each screenshot."""

from __future__ import annotations

import base64
import io
import json
import os
from concurrent.futures import ThreadPoolExecutor
from html import escape
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from PIL import Image

from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.viewer.overlay import describe_step, move_cursor, overlay, step_actions
from verl_cua.viewer.planner import executor_details, planner_parts, planner_record
from verl_cua.viewer.prompt import prompt_details, shot_id
from verl_cua.viewer.runs import Run, split_key, step_advantage, step_valid
from verl_cua.viewer.strip import filmstrip, views

EMBED_MAX_WIDTH = 1280
EMBED_QUALITY = 80
STATUS_MARKS = {"success": "✓", "failure": "✗", "infra_failure": "⚠", "unfinished": "–", "missing": "–"}
STATUS_LABELS = {"infra_failure": "infra failure"}


class Images:
    """Screenshot `src` values: paths relative to the report, or JPEG data URIs when embedding."""

    def __init__(self, report_dir: Path, embed: bool):
        self.report_dir = os.path.abspath(report_dir)
        self.embed = embed
        self._sizes: dict[Path, tuple[int, int] | None] = {}
        self._data: dict[Path, str | None] = {}

    def path(self, episode: EpisodeRecord, name: Any) -> Path | None:
        """The screenshot file of an episode, or None when unnamed, outside the episode directory or absent."""
        if not name or not isinstance(name, str):
            return None
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts:
            return None
        path = episode.dir / rel
        return path if path.is_file() else None

    def size(self, path: Path) -> tuple[int, int] | None:
        """Pixel size of an image file (header only), None if unreadable."""
        if path not in self._sizes:
            try:
                with Image.open(path) as image:
                    self._sizes[path] = image.size
            except (OSError, ValueError):
                self._sizes[path] = None
        return self._sizes[path]

    def prefetch(self, paths: list[Path | None]) -> None:
        """When embedding, encode these screenshots in parallel threads (PIL releases the GIL) ahead of `src`."""
        todo = [p for p in dict.fromkeys(paths) if p is not None and p not in self._data]
        if not self.embed or not todo:
            return
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
            self._data.update(zip(todo, pool.map(data_uri, todo), strict=True))

    def src(self, path: Path) -> str | None:
        """The `src` attribute value (not yet HTML-escaped); None for an unreadable image when embedding."""
        if not self.embed:
            return quote(os.path.relpath(os.path.abspath(path), self.report_dir).replace(os.sep, "/"))
        return self._data.pop(path) if path in self._data else data_uri(path)


def data_uri(path: Path) -> str | None:
    """The screenshot as a JPEG data URI, at most `EMBED_MAX_WIDTH` wide; None if it cannot be read."""
    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
            if image.width > EMBED_MAX_WIDTH:
                height = max(1, round(image.height * EMBED_MAX_WIDTH / image.width))
                image = image.resize((EMBED_MAX_WIDTH, height), Image.Resampling.LANCZOS)
            buffer = io.BytesIO()
            image.save(buffer, format="JPEG", quality=EMBED_QUALITY, optimize=True)
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def status_badge(status: str) -> str:
    """A coloured status pill (`success`, `failure`, `infra failure`, `unfinished`, `missing`)."""
    label = STATUS_LABELS.get(status, status)
    return f'<span class="badge st-{escape(status)}">{STATUS_MARKS.get(status, "")} {escape(label)}</span>'


def steps_text(n: int) -> str:
    """`1 step`, `3 steps`."""
    return f"{n} step" if n == 1 else f"{n} steps"


def number(value: Any, signed: bool = False) -> str:
    """A short number (`1`, `0.25`, `+0.53`); non-numbers are escaped as they are."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return escape(str(value))
    return f"{value:+.3g}" if signed else f"{value:.3g}"


def _signed(label: str, value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"<span>{label} {escape(str(value))}</span>"
    css = "pos" if value > 0 else "neg" if value < 0 else "zero"
    return f'<span>{label} <b class="{css}">{number(value, signed=True)}</b></span>'


def _tokens(usage: Any) -> str:
    if not isinstance(usage, dict):
        return ""
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if prompt is None and completion is None:
        return ""
    fmt = lambda v: f"{v:,}" if isinstance(v, int) else escape(str(v if v is not None else "?"))  # noqa: E731
    return f"<span>{fmt(prompt)} → {fmt(completion)} tok</span>"


def _seconds(label: str, value: Any) -> str:
    return f"<span>{label} {value:.2f} s</span>" if isinstance(value, (int, float)) else ""


def _screen(value: Any) -> tuple[int, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and v > 0 for v in value):
        return value[0], value[1]
    return None


def _shot(images: Images, episode: EpisodeRecord, name: Any, screen: Any, alt: str, actions=None, cursor=None) -> str:
    """The screenshot box, sized to the action space (`screen`, else the image's size), the actions drawn over it."""
    path = images.path(episode, name)
    size = _screen(screen) or (images.size(path) if path is not None else None)
    layer = overlay(actions, size, cursor) if size and actions else ""
    width, height = size or (16, 9)
    src = images.src(path) if path is not None else None
    if src is None:
        note = "no screenshot" if not name else "screenshot missing" if path is None else "screenshot unreadable"
        body = f'<div class="noimg">{note}</div>'
    else:
        src = escape(src)
        body = f'<img src="{src}" loading="lazy" decoding="async" alt="{escape(alt)}">'
        if not images.embed:  # the full-size file in a new tab (browsers refuse to open data URIs that way)
            body = f'<a href="{src}" target="_blank" rel="noopener">{body}</a>'
    shot = f' data-shot="{shot_id(name)}"' if isinstance(name, str) else ""
    cap = f";max-width:{max(360, 2 * width)}px" if size and 2 * width < 1100 else ""  # small screens: at most 2x
    return f'<div class="shot"{shot} style="aspect-ratio:{width}/{height}{cap}">{body}{layer}</div>'


def _step_cell(images: Images, episode: EpisodeRecord, index: int, run_index: int, cursor: Any) -> str:
    step = episode.steps[index]
    action = step.get("action") if isinstance(step.get("action"), dict) else {}
    alt = f"screenshot before step {index + 1}"
    shot = _shot(images, episode, step.get("screenshot"), step.get("screen"), alt, step_actions(step), cursor)
    valid = bool(step_valid(step))
    badge = '<span class="badge ok">valid</span>' if valid else '<span class="badge bad">invalid</span>'
    planned = planner_record(step)  # planner mode: the planner's thought and the executor's action, labelled
    if planned is None:
        parts = [f'<div class="act"><code>{escape(describe_step(step))}</code>{badge}</div>']
    else:
        parts = planner_parts(step, planned, badge)
    if step.get("error"):
        parts.append(f'<div class="note {"warn" if valid else "bad"}">{escape(str(step["error"]))}</div>')
    if step.get("api_result") is not None:
        parts.append(f'<div class="note">API result: {escape(str(step["api_result"]))}</div>')
    if step.get("elements_text"):  # what the model read beside the screenshot, open: it is what it acted on
        read = str(step["elements_text"])
        title = escape(read.split("\n", 1)[0].rstrip(":"))
        parts.append(f'<details class="raw read" open><summary>{title}</summary><pre>{escape(read)}</pre></details>')
    if step.get("env_error"):
        parts.append(f'<div class="note bad">env error: {escape(str(step["env_error"]))}</div>')
    if step.get("infra_failure"):
        parts.append('<div class="note warn">⚠ infra failure</div>')
    if action.get("thought") and planned is None:
        parts.append(f'<div class="thought">{escape(str(action["thought"]))}</div>')
    timing = step.get("timing") if isinstance(step.get("timing"), dict) else {}
    model = "planner" if planned is not None else "model"
    stats = [_seconds(model, timing.get("model_s")), _seconds("executor", timing.get("executor_s")),
             _seconds("env", timing.get("env_s")), _tokens(step.get("usage"))]  # fmt: skip
    advantage = step_advantage(episode, index)
    if step.get("reward") is not None and (step["reward"] != 0 or advantage is not None):
        stats.append(_signed("reward", step["reward"]))
    if advantage is not None:
        stats.append(_signed("adv", advantage))
    parts.append(f'<div class="stats">{"".join(stats)}</div>')
    if step.get("model_text"):
        text = escape(str(step["model_text"]))
        parts.append(f'<details class="raw"><summary>{model} output</summary><pre>{text}</pre></details>')
    if planned is not None:
        parts.append(executor_details(planned))
    if action.get("code"):
        parts.append(
            f'<details class="raw"><summary>raw code</summary><pre>{escape(str(action["code"]))}</pre></details>'
        )
    parts.append(prompt_details(episode, index))
    if planned is not None:
        parts.append(prompt_details(episode, index, "executor"))
    info = f'<div class="info">{"".join(parts)}</div>'
    return f'<div class="cell step" data-run="{run_index}" data-step="{index + 1}">{shot}{info}</div>'


def _final_cell(images: Images, episode: EpisodeRecord | None, run_index: int) -> str:
    if episode is None:
        note = '<span class="empty-note">not in this run</span>'
        return f'<div class="cell final empty" data-run="{run_index}">{note}</div>'
    result = episode.result or {}
    screen = episode.steps[-1].get("screen") if episode.steps else None
    shot = ""
    if result.get("final_screenshot"):
        shot = _shot(images, episode, result["final_screenshot"], screen, "final screenshot")
    summary = [status_badge(episode.status)]
    if result.get("score") is not None:
        summary.append(f"<span>score <b>{number(result['score'])}</b></span>")
    summary.append(f"<span>{steps_text(len(episode.steps))}</span>")
    if result.get("end_reason"):
        summary.append(f"<span>end: {escape(str(result['end_reason']))}</span>")
    parts = [f'<div class="summary">{"".join(summary)}</div>']
    if result.get("error"):
        parts.append(f'<div class="note bad">{escape(str(result["error"]))}</div>')
    stats = [
        _seconds("total", result.get("seconds")),
        _seconds("model", result.get("model_seconds")),
        _seconds("env", result.get("env_seconds")),
        _tokens(result.get("usage")),
    ]
    if result.get("invalid_actions"):
        stats.append(f"<span>{number(result['invalid_actions'])} invalid</span>")
    if isinstance(result.get("attempts"), int) and result["attempts"] > 1:
        stats.append(f"<span>{result['attempts']} attempts</span>")
    if result.get("reward") is not None:
        stats.append(_signed("reward", result["reward"]))
    parts.append(f'<div class="stats">{"".join(stats)}</div>')
    info = f'<div class="info">{"".join(parts)}</div>'
    return f'<div class="cell final" data-run="{run_index}">{shot}{info}</div>'


def _run_head(run: Run, episode: EpisodeRecord | None, run_index: int) -> str:
    status = episode.status if episode is not None else "missing"
    meta = ""
    if episode is not None and episode.result and episode.result.get("score") is not None:
        meta = f'<span class="meta">score {number(episode.result["score"])} · {steps_text(len(episode.steps))}</span>'
    elif episode is not None:
        meta = f'<span class="meta">{steps_text(len(episode.steps))}</span>'
    name = f'<span class="name">{escape(run.name)}</span>'
    return f'<div class="run-head" data-run="{run_index}">{name}{status_badge(status)}{meta}</div>'


def episode_views(heads: list[str], labels: list[str], episodes: list[EpisodeRecord | None], images: Images) -> str:
    """The episodes side by side: the grid (a column per episode under its `heads` cell, rows aligned by turn, then
    the end) and the filmstrips (one per episode, named by `labels`) with the toggle between them."""
    images.prefetch(
        [images.path(e, s.get("screenshot")) for e in episodes if e for s in e.steps]
        + [images.path(e, e.result.get("final_screenshot")) for e in episodes if e and e.result]
    )
    cells = ['<div class="corner"></div>', *heads]
    cursors: list[Any] = [None] * len(episodes)
    longest = max((len(e.steps) for e in episodes if e), default=0)
    for index in range(longest):
        cells.append(f'<div class="step-no">{index + 1}</div>')
        for i, episode in enumerate(episodes):
            if episode is None or index >= len(episode.steps):
                cells.append(f'<div class="cell empty" data-run="{i}" data-step="{index + 1}"></div>')
                continue
            cells.append(_step_cell(images, episode, index, i, cursors[i]))
            cursors[i] = move_cursor(step_actions(episode.steps[index]), cursors[i])
    cells.append('<div class="step-no">end</div>')
    cells += [_final_cell(images, episode, i) for i, episode in enumerate(episodes)]
    grid = f'<div class="grid" style="--runs:{len(episodes)}">{"".join(cells)}</div>'
    strips = [filmstrip(i, label, episode) for i, (label, episode) in enumerate(zip(labels, episodes, strict=True))]
    return views(grid, strips, longest)


def lazy_section(anchor: str, key: str, content: str) -> str:
    """A `<section class="task-detail">` whose `content` waits as a JSON string until the page's script opens it (a
    page of thousands of steps loads in a moment); "</" and "<!" are escaped so that nothing in it can end or alter
    the data's script element."""
    data = json.dumps(content, ensure_ascii=False).replace("</", "<\\/").replace("<!", "\\u003c!")
    return (
        f'<section class="task-detail panel" id="{escape(anchor)}" data-task="{escape(key)}">'
        f'<script type="application/json" class="detail-data">{data}</script></section>\n'
    )


def nav_links(nav: dict[str, str]) -> str:
    """The prev / list / next links of a detail head (`nav`: those keys to anchors)."""
    return "".join(
        f'<a href="#{escape(nav[k])}">{label}</a>'
        for k, label in (("prev", "← prev"), ("list", "list"), ("next", "next →"))
        if nav.get(k)
    )


def detail_section(runs: list[Run], key: str, anchor: str, nav: dict[str, str], images: Images, text: str) -> str:
    """The `<section class="task-detail">` of one task, the runs side by side; `nav` maps prev/list/next to anchors,
    `text` is the instruction."""
    domain, task_id = split_key(key)
    head = (
        f'<div class="detail-head"><span class="domain">{escape(domain)}</span><h2>{escape(task_id)}</h2>'
        f'<span class="nav">{nav_links(nav)}</span></div>'
        f'<p class="instruction">{escape(text) if text else "<i>no instruction recorded</i>"}</p>'
    )
    episodes = [run.episodes.get(key) for run in runs]
    heads = [_run_head(run, episode, i) for i, (run, episode) in enumerate(zip(runs, episodes, strict=True))]
    labels = [_strip_label(run.name, episode) for run, episode in zip(runs, episodes, strict=True)]
    return lazy_section(anchor, key, head + episode_views(heads, labels, episodes, images))


def _strip_label(name: str, episode: EpisodeRecord | None) -> str:
    status = episode.status if episode is not None else "missing"
    return f'<span class="name">{escape(name)}</span>{status_badge(status)}'
