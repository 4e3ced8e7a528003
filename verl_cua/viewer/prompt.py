"""The prompt a step's model call saw (the step line's `prompt`, `prompt_record`): its messages rebuilt across the
episode and rendered as a collapsed `<details>`; text already shown in an earlier step's prompt is named, not
repeated, and images are placeholders the page's script fills with the step screenshots already on the page."""

from __future__ import annotations

import hashlib
from html import escape
from typing import Any

from verl_cua.envs.trajectory import EpisodeRecord

Message = tuple[str, list[dict[str, Any]], int]  # role, content parts, the 1-based step whose record first holds it


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [part for part in content if isinstance(part, dict)]
    return [{"type": "text", "text": "" if content is None else str(content)}]


def _record(episode: EpisodeRecord, index: int, whose: str = "model") -> dict[str, Any] | None:
    """Step `index`'s prompt record: the model's (`prompt`), or the executor's (`executor.prompt`, planner mode)."""
    step = episode.steps[index]
    executor = step.get("executor") if isinstance(step.get("executor"), dict) else {}
    record = step.get("prompt") if whose == "model" else executor.get("prompt")
    ok = isinstance(record, dict) and isinstance(record.get("messages"), list)
    return record if ok else None


def prompt_messages(episode: EpisodeRecord, index: int, whose: str = "model") -> tuple[list[Message], bool] | None:
    """The messages the model (or `whose="executor"`: the executor) saw at step `index` (0-based) and whether all of
    them were recorded (an `episode` layout prompt is the first step's, then each reply and the turn after it); None
    when the step has no prompt."""
    record = _record(episode, index, whose)
    if record is None:
        return None
    own = [(str(m.get("role")), _parts(m.get("content")), index + 1) for m in record["messages"] if isinstance(m, dict)]
    if record.get("layout") != "episode" or index == 0:
        return own, True
    messages: list[Message] = []
    for j in range(index):
        earlier = _record(episode, j, whose)
        if earlier is None:
            return own, False
        messages += [(str(m.get("role")), _parts(m.get("content")), j + 1) for m in earlier["messages"]]
        messages.append(("assistant", [{"type": "text", "text": str(episode.steps[j].get("model_text") or "")}], j + 1))
    return messages + own, True


def _seen_texts(episode: EpisodeRecord, index: int, whose: str = "model") -> dict[str, int]:
    """Each message text of the prompts of steps before `index` -> the first step (1-based) that showed it."""
    seen: dict[str, int] = {}
    for j in range(index):
        record = _record(episode, j, whose)
        for message in record["messages"] if record else []:
            for part in _parts(message.get("content") if isinstance(message, dict) else None):
                if part.get("type") == "text" and part.get("text"):
                    seen.setdefault(str(part["text"]), j + 1)
    return seen


def shot_id(name: str) -> str:
    """The `data-shot` of a screenshot file name: what a prompt image and the grid's screenshot share (a hash, so
    that an embedded report names no file)."""
    return hashlib.sha1(name.encode()).hexdigest()[:12]


def _image(part: dict[str, Any], sent: bool) -> str:
    name = part.get("screenshot")
    label = escape(str(name)) if name else "image not saved"
    if not sent:
        return f'<span class="pimg omitted" title="older than the images sent">{label}<br>not sent</span>'
    shot = f' data-shot="{shot_id(str(name))}"' if name else ""
    return f'<span class="pimg"{shot}><span class="pname">{label}</span></span>'


def prompt_details(episode: EpisodeRecord, index: int, whose: str = "model") -> str:
    """The `<details class="prompt">` of step `index` (0-based); "" when the trace holds no prompt for it. `whose`:
    `model` (the step's model, the planner in planner mode) or `executor` (planner mode: what the executor got)."""
    rebuilt = prompt_messages(episode, index, whose)
    if rebuilt is None:
        return ""
    messages, complete = rebuilt
    keep = (_record(episode, index, whose) or {}).get("history_images")
    images = [id(p) for _, parts, _ in messages for p in parts if p.get("type") == "image"]
    sent = set(images[-keep:] if isinstance(keep, int) and keep > 0 else images if keep is None else [])
    seen = _seen_texts(episode, index, whose)
    rows = [] if complete else ['<div class="msg note warn">earlier messages were not recorded</div>']
    for role, parts, origin in messages:
        body = []
        for part in parts:
            if part.get("type") == "image":
                body.append(_image(part, id(part) in sent))
                continue
            text = str(part.get("text") or "")
            if role == "assistant" and origin <= index:
                body.append(f'<span class="same">step {origin}\'s model output</span>')
            elif text in seen:
                body.append(f'<span class="same">as in step {seen[text]}\'s prompt ({len(text):,} chars)</span>')
            elif text:
                body.append(f"<pre>{escape(text)}</pre>")
        rows.append(f'<div class="msg"><span class="role">{escape(role)}</span>{"".join(body)}</div>')
    count = lambda n, noun: f"{n} {noun}" if n == 1 else f"{n} {noun}s"  # noqa: E731
    title = "executor prompt" if whose == "executor" else "prompt"
    summary = f"{title} · {count(len(messages), 'message')} · {count(len(sent), 'image')}"
    return f'<details class="raw prompt"><summary>{summary}</summary>{"".join(rows)}</details>'
