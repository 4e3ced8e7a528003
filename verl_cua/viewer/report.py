"""`build_report`: one static, offline HTML file with run cards, a filterable task table and per-task details."""

from __future__ import annotations

import os
import re
import tempfile
from html import escape
from pathlib import Path

from verl_cua.viewer.detail import STATUS_MARKS, Images, detail_section, number, steps_text
from verl_cua.viewer.runs import Run, instruction, load_runs, split_key, task_keys
from verl_cua.viewer.template import head, tail

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


def _run_card(run: Run, index: int) -> str:
    counts = run.counts()
    rate = run.success_rate()
    kv = " · ".join(
        escape(str(run.meta[k])) for k in ("model", "format", "env", "provider_api", "estimator") if run.meta.get(k)
    )
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
    extra = f"{counts['tasks']} tasks · {sum(steps) / len(steps):.1f} steps per task" if steps else "no episodes"
    return (
        f'<div class="run-card" data-run="{index}" title="{escape(str(run.dir))}"><h2>{escape(run.name)}</h2>'
        f'<div class="kv">{kv or "no run.json"}</div>'
        f'<div class="rate">{rate_text}<small>{counts["success"]} / {counts["scored"]} scored</small></div>'
        f'<div class="bar">{bar}</div><div class="counts">{"".join(spans)}</div><div class="kv">{extra}</div></div>'
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
    return (
        f'<td class="mark st-{escape(status)}" data-run="{index}" title="{escape(title)}"><span class="sym">'
        f'{STATUS_MARKS.get(status, "?")}</span> <span class="meta">{" · ".join(meta)}</span></td>'
    )


def _filters(runs: list[Run], domains: list[str], total: int) -> str:
    options = "".join(f'<option value="{escape(d)}">{escape(d or "(none)")}</option>' for d in domains)
    disagree = ""
    if len(runs) >= 2:
        disagree = '<label><input type="checkbox" id="f-disagree"> runs disagree</label>'
    return (
        '<div class="filters"><label><input type="checkbox" id="f-failed"> failed only</label>'
        f'{disagree}<select id="f-domain" aria-label="domain"><option value="">all domains</option>{options}</select>'
        '<input type="search" id="f-search" placeholder="search task id or instruction" aria-label="search">'
        '<span class="keys"><kbd>j</kbd> <kbd>k</kbd> next / previous task, <kbd>Esc</kbd> back to the list</span>'
        f'<span class="count" id="f-count">{total} of {total} tasks</span></div>'
    )


def _task_table(runs: list[Run], keys: list[str], ids: dict[str, str], texts: dict[str, str]) -> str:
    heads = "".join(f'<th data-run="{i}">{escape(run.name)}</th>' for i, run in enumerate(runs))
    rows = []
    for key in keys:
        domain, task_id = split_key(key)
        statuses = ",".join(run.status(key) for run in runs)
        search = f"{key} {texts[key]}".lower()
        marks = "".join(_mark(run, key, i) for i, run in enumerate(runs))
        rows.append(
            f'<tr class="task-row" id="row-{escape(ids[key])}" data-task="{escape(key)}" '
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


def build_report(run_dirs: list[str | Path], out: str | Path, *, embed: bool = False, title: str | None = None) -> Path:
    """Write the HTML report of one or more run directories to `out` (an `.html` file, else a folder for
    `report.html`); `embed` inlines the screenshots so the file can be shared alone. Returns the file's path."""
    if not run_dirs:
        raise ValueError("build_report needs at least one run directory")
    out = Path(out)
    if out.is_dir() or out.suffix.lower() not in (".html", ".htm"):
        out = out / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    runs = load_runs(list(run_dirs))
    keys = task_keys(runs)
    ids = anchors(keys)
    texts = {key: instruction(runs, key) for key in keys}
    images = Images(out.parent, embed)
    title = title or "verl-cua: " + " vs ".join(run.name for run in runs)
    domains = sorted({split_key(key)[0] for key in keys})
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(head(title))
            sub = f"{len(runs)} run{'s' if len(runs) > 1 else ''} · {len(keys)} tasks"
            f.write(f'<header class="top" id="top"><h1>{escape(title)}</h1><span class="sub">{sub}</span></header>\n')
            f.write(f'<section class="runs">{"".join(_run_card(run, i) for i, run in enumerate(runs))}</section>\n')
            f.write(f'<section class="panel tasks">{_filters(runs, domains, len(keys))}')
            if keys:
                f.write(_task_table(runs, keys, ids, texts))
            else:
                f.write(
                    '<div class="empty-note">No episodes found (no trajectory.jsonl below the run directories).</div>'
                )
            f.write("</section><noscript>The task details need JavaScript.</noscript>\n")
            for i, key in enumerate(keys):
                nav = {"list": f"row-{ids[key]}"}
                if i > 0:
                    nav["prev"] = ids[keys[i - 1]]
                if i + 1 < len(keys):
                    nav["next"] = ids[keys[i + 1]]
                f.write(detail_section(runs, key, ids[key], nav, images, texts[key]))
            f.write(tail())
            f.flush()
            os.fsync(f.fileno())  # the rename below must never publish a report the disk does not hold yet
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
