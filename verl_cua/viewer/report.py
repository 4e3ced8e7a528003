"""`build_report`: one static, offline HTML file with run cards, a filterable task table and per-task details."""

from __future__ import annotations

import os
import re
import tempfile
from html import escape
from pathlib import Path

from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.viewer.detail import STATUS_MARKS, Images, detail_section, number, steps_text
from verl_cua.viewer.failures import failure_counts, failure_reason, reason_label, reason_token
from verl_cua.viewer.groups import all_groups, group_sections, group_table
from verl_cua.viewer.runs import Run, instruction, load_runs, split_key, task_keys
from verl_cua.viewer.template import head, tail
from verl_cua.viewer.training import GroupKey, is_training_trace, trace_meta

COUNT_LABELS = (
    ("success", "success"),
    ("failure", "failure"),
    ("infra_failure", "infra"),
    ("unfinished", "unfinished"),
)


def anchors(keys: list[str]) -> dict[str, str]:
    """A unique, URL-safe element id per task key (`task-calc-calc-sum-column`)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for key in keys:
        base = "task-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", key).strip("-") or "x")
        anchor, n = base, 1
        while anchor in used:
            n += 1
            anchor = f"{base}-{n}"
        used.add(anchor)
        out[key] = anchor
    return out


def _failures(run: Run, index: int) -> str:
    counts = failure_counts(list(run.episodes.values()))
    if not counts:
        return ""
    buttons = "".join(
        f'<button type="button" class="reason" data-reason="{reason_token(index, reason)}" '
        f'title="show only these">{escape(reason_label(reason))} <b>{count}</b></button>'
        for reason, count in counts
    )
    return f'<div class="reasons"><span class="kv">why episodes failed:</span>{buttons}</div>'


def _run_card(run: Run, index: int, meta: dict | None = None, noun: str = "task") -> str:
    counts = run.counts()
    rate = run.success_rate()
    meta = run.meta if meta is None else meta
    kv = " · ".join(
        escape(str(meta[k])) for k in ("model", "format", "env", "provider_api", "estimator") if meta.get(k)
    )
    if meta.get("planner"):  # planner mode: the model is the planner, an executor acts
        executor = meta.get("executor") if isinstance(meta.get("executor"), dict) else {}
        by = executor.get("model") if executor.get("kind") == "openai" else executor.get("kind")
        kv += f" · planner {escape(str(meta['planner']))} · executor {escape(str(by or '?'))}"
    rate_text = f"{rate * 100:.1f}%" if rate is not None else "–"
    bar = "".join(
        f'<span class="b-{status}" style="flex:{counts[status]}"></span>'
        for status, _ in COUNT_LABELS
        if counts[status]
    )
    spans = [
        f'<span class="st-{status}"><span class="sym">{STATUS_MARKS[status]}</span>{counts[status]} {label}</span>'
        for status, label in COUNT_LABELS
        if counts[status] or status in ("success", "failure")
    ]
    steps = [len(e.steps) for e in run.episodes.values()]
    extra = f"{counts['tasks']} {noun}s · {sum(steps) / len(steps):.1f} steps per {noun}" if steps else "no episodes"
    return (
        f'<div class="run-card" data-run="{index}" title="{escape(str(run.dir))}"><h2>{escape(run.name)}</h2>'
        f'<div class="kv">{kv or "no run.json"}</div>'
        f'<div class="rate">{rate_text}<small>{counts["success"]} / {counts["scored"]} scored</small></div>'
        f'<div class="bar">{bar}</div><div class="counts">{"".join(spans)}</div><div class="kv">{extra}</div>'
        f"{_failures(run, index)}</div>"
    )


def _mark(run: Run, key: str, index: int) -> str:
    status = run.status(key)
    episode = run.episodes.get(key)
    meta = []
    if episode is not None:
        meta.append(steps_text(len(episode.steps)))
        if episode.result and episode.result.get("score") is not None:
            meta.append(number(episode.result["score"]))
    title = f"{run.name}: {status.replace('_', ' ')}"
    reason = failure_reason(episode) if episode is not None else None
    token = f' data-reason="{reason_token(index, reason)}"' if reason else ""
    return (
        f'<td class="mark st-{escape(status)}" data-run="{index}"{token} title="{escape(title)}"><span class="sym">'
        f'{STATUS_MARKS.get(status, "?")}</span> <span class="meta">{" · ".join(meta)}</span></td>'
    )


def _reason_options(runs: list[Run]) -> str:
    options = []
    for i, run in enumerate(runs):
        for reason, count in failure_counts(list(run.episodes.values())):
            label = f"{run.name}: " if len(runs) > 1 else ""
            label += f"{reason_label(reason)} ({count})"
            options.append(f'<option value="{reason_token(i, reason)}">{escape(label)}</option>')
    return "".join(options)


def _filters(runs: list[Run], domains: list[str], total: int, training: bool = False) -> str:
    noun, every = ("groups", "all steps") if training else ("tasks", "all domains")
    options = "".join(f'<option value="{escape(d)}">{escape(d or "(none)")}</option>' for d in domains)
    disagree = ""
    if training:
        disagree = '<label><input type="checkbox" id="f-disagree"> successes and failures (a signal)</label>'
    elif len(runs) >= 2:
        disagree = '<label><input type="checkbox" id="f-disagree"> runs disagree</label>'
    reasons = _reason_options(runs)
    if reasons:
        reasons = (
            f'<select id="f-reason" aria-label="failure reason"><option value="">any failure reason</option>'
            f"{reasons}</select>"
        )
    return (
        '<div class="filters"><label><input type="checkbox" id="f-failed"> failed only</label>'
        f'{disagree}<select id="f-domain" aria-label="{noun}"><option value="">{every}</option>{options}</select>'
        f'{reasons}<input type="search" id="f-search" placeholder="search task id or instruction" aria-label="search">'
        f'<span class="keys"><kbd>j</kbd> <kbd>k</kbd> next / previous, <kbd>Esc</kbd> back to the list</span>'
        f'<span class="count" id="f-count" data-noun="{noun}">{total} of {total} {noun}</span></div>'
    )


def _task_table(runs: list[Run], keys: list[str], ids: dict[str, str], texts: dict[str, str]) -> str:
    heads = "".join(f'<th data-run="{i}">{escape(run.name)}</th>' for i, run in enumerate(runs))
    rows = []
    for key in keys:
        domain, task_id = split_key(key)
        statuses = ",".join(run.status(key) for run in runs)
        search = f"{key} {texts[key]}".lower()
        marks = "".join(_mark(run, key, i) for i, run in enumerate(runs))
        reasons = " ".join(
            reason_token(i, reason)
            for i, run in enumerate(runs)
            if key in run.episodes and (reason := failure_reason(run.episodes[key]))
        )
        rows.append(
            f'<tr class="task-row" id="row-{escape(ids[key])}" data-task="{escape(key)}" data-reasons="{reasons}" '
            f'data-domain="{escape(domain)}" data-statuses="{escape(statuses)}" data-detail="{escape(ids[key])}" '
            f'data-search="{escape(search)}">'
            f'<td class="domain">{escape(domain)}</td><td class="tid"><a href="#{escape(ids[key])}" '
            f'title="{escape(key)}">{escape(task_id)}</a></td><td class="instr" title="{escape(texts[key])}">'
            f"{escape(texts[key])}</td>{marks}</tr>"
        )
    return (
        '<div class="table-scroll"><table class="task-table"><thead><tr><th>domain</th><th>task</th>'
        f"<th>instruction</th>{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


NO_RUN = (
    "{dir} holds no run: a run folder holds episode folders, each with trajectory.jsonl, result.json and "
    "screenshots (verl-cua eval --out DIR writes <domain>/<task>/; a training trace, cua.trace.dir, "
    "step_<N>/<task>/<uid>-<session>/)"
)


def _check_runs(runs: list[Run]) -> bool:
    """Refuse folders that hold no run, and eval runs mixed with training traces; True for training traces."""
    for run in runs:
        if not run.episodes and not run.meta:
            raise ValueError(NO_RUN.format(dir=run.dir))
    traces = [is_training_trace(run) for run in runs]
    if any(traces) and not all(traces):
        trace = next(run for run, t in zip(runs, traces, strict=True) if t)
        other = next(run for run, t in zip(runs, traces, strict=True) if not t)
        raise ValueError(
            f"{trace.dir} is a training trace and {other.dir} is not: report eval runs and training traces apart"
        )
    return all(traces)


def _write_tasks(f, runs: list[Run], keys: list[str], images: Images) -> None:
    """The eval runs' body: the task table, then each task's detail (`keys`: the runs' task keys, in order)."""
    ids = anchors(keys)
    texts = {key: instruction(runs, key) for key in keys}
    domains = sorted({split_key(key)[0] for key in keys})
    f.write(f'<section class="panel tasks">{_filters(runs, domains, len(keys))}')
    if keys:
        f.write(_task_table(runs, keys, ids, texts))
    else:
        f.write('<div class="empty-note">No episodes found (no trajectory.jsonl below the run directories).</div>')
    f.write("</section><noscript>The task details need JavaScript.</noscript>\n")
    for i, key in enumerate(keys):
        nav = {"list": f"row-{ids[key]}"}
        if i > 0:
            nav["prev"] = ids[keys[i - 1]]
        if i + 1 < len(keys):
            nav["next"] = ids[keys[i + 1]]
        f.write(detail_section(runs, key, ids[key], nav, images, texts[key]))


def _write_groups(f, runs: list[Run], groups: dict[GroupKey, list[EpisodeRecord]], images: Images) -> None:
    """The training traces' body: the group table, then each group's detail (`groups`: the traces' GRPO groups)."""
    steps = sorted({key.step_label for key in groups}, key=lambda label: (label.startswith("val"), len(label), label))
    f.write(f'<section class="panel tasks">{_filters(runs, steps, len(groups), training=True)}')
    f.write(group_table(runs, groups))
    f.write("</section><noscript>The group details need JavaScript.</noscript>\n")
    for section in group_sections(runs, groups, images):
        f.write(section)


def build_report(run_dirs: list[str | Path], out: str | Path, *, embed: bool = False, title: str | None = None) -> Path:
    """Write the HTML report of one or more run directories to `out` (an `.html` file, else a folder for
    `report.html`); `embed` inlines the screenshots so the file can be shared alone. Eval runs show side by side
    per task, training traces per GRPO group. Returns the file's path; a folder that holds no run is refused."""
    if not run_dirs:
        raise ValueError("build_report needs at least one run directory")
    runs = load_runs(list(run_dirs))
    training = _check_runs(runs)
    out = Path(out)
    if out.is_dir() or out.suffix.lower() not in (".html", ".htm"):
        out = out / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    images = Images(out.parent, embed)
    title = title or "verl-cua: " + " vs ".join(run.name for run in runs)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(head(title))
            units = all_groups(runs) if training else task_keys(runs)  # the body's rows: groups, or tasks
            if training:
                sub = f"training trace · {len(units)} groups · {sum(len(r.episodes) for r in runs)} episodes"
            else:
                sub = f"{len(runs)} run{'s' if len(runs) > 1 else ''} · {len(units)} tasks"
            f.write(f'<header class="top" id="top"><h1>{escape(title)}</h1><span class="sub">{sub}</span></header>\n')
            cards = [
                _run_card(run, i, trace_meta(run), "episode") if training else _run_card(run, i)
                for i, run in enumerate(runs)
            ]
            f.write(f'<section class="runs">{"".join(cards)}</section>\n')
            (_write_groups if training else _write_tasks)(f, runs, units, images)
            f.write(tail())
            f.flush()
            os.fsync(f.fileno())  # the rename below must never publish a report the disk does not hold yet
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
