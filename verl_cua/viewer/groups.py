"""The training mode of the report: a table of GRPO groups (training step, task, uid) and, per group, its episodes
side by side with their rewards, statuses and per-step advantages, and the group's mean and std reward."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import escape

from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.viewer.detail import (
    STATUS_MARKS,
    Images,
    episode_views,
    lazy_section,
    nav_links,
    number,
    status_badge,
    steps_text,
)
from verl_cua.viewer.failures import failure_reason, reason_label, reason_token
from verl_cua.viewer.runs import Run, episode_instruction, step_advantage
from verl_cua.viewer.training import GroupKey, group_episodes, reward, reward_stats, session


def all_groups(runs: list[Run]) -> dict[GroupKey, list[EpisodeRecord]]:
    """Every run's groups, run by run."""
    return {key: episodes for i, run in enumerate(runs) for key, episodes in group_episodes(run, i).items()}


def group_anchor(key: GroupKey) -> str:
    """The element id of a group's detail (`group-0-step_000003-click-test-ab12cd34`)."""
    return "group-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", key.id).strip("-") or "x")


def _stats_text(episodes: list[EpisodeRecord]) -> str:
    mean, std = reward_stats(episodes)
    scored = sum(reward(e) is not None for e in episodes)
    if mean is None:
        return "no scored episode"
    spread = f"std <b>{number(std)}</b>" if std is not None else "no std (one scored episode)"
    return f"reward mean <b>{number(mean)}</b> · {spread} over {scored} scored"


def _advantage_text(episode: EpisodeRecord) -> str:
    values = [step_advantage(episode, i) for i in range(len(episode.steps))]
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return ""
    low, high = min(values), max(values)
    text = f"{low:+.3g}" if abs(high - low) < 1e-9 else f"{low:+.3g} … {high:+.3g}"
    css = "pos" if low > 0 else "neg" if high < 0 else "zero"
    return f'<span>adv <b class="{css}">{text}</b></span>'


def _episode_head(episode: EpisodeRecord, column: int) -> str:
    value = reward(episode)
    meta = [f"<span>reward <b>{number(value)}</b></span>" if value is not None else "", _advantage_text(episode)]
    meta.append(f"<span>{steps_text(len(episode.steps))}</span>")
    reason = failure_reason(episode)
    why = f'<span class="why">{escape(reason_label(reason))}</span>' if reason else ""
    name = f'<span class="name">#{session(episode)}</span>'
    return (
        f'<div class="run-head" data-run="{column}">{name}{status_badge(episode.status)}'
        f'<span class="meta">{"".join(meta)}</span>{why}</div>'
    )


def group_section(run: Run, key: GroupKey, episodes: list[EpisodeRecord], nav: dict[str, str], images: Images) -> str:
    """The detail of one group: its head (step, task, uid, instruction, mean and std reward) and its episodes."""
    text = episode_instruction(episodes)
    where = f"{escape(run.name)} · {escape(key.step_label)} · {escape(key.task)}"
    head = (
        f'<div class="detail-head"><span class="domain">{where}</span><h2>group {escape(key.uid)}</h2>'
        f'<span class="nav">{nav_links(nav)}</span></div>'
        f'<p class="instruction">{escape(text) if text else "<i>no instruction recorded</i>"}</p>'
        f'<div class="group-stats">{len(episodes)} episodes · {_stats_text(episodes)} '
        '<span class="muted">(what GRPO normalises each reward against)</span></div>'
    )
    heads = [_episode_head(episode, i) for i, episode in enumerate(episodes)]
    labels = [f'<span class="name">#{session(e)}</span>{status_badge(e.status)}' for e in episodes]
    return lazy_section(group_anchor(key), key.id, head + episode_views(heads, labels, list(episodes), images))


def _marks(key: GroupKey, episodes: list[EpisodeRecord]) -> str:
    marks = []
    for episode in episodes:
        reason = failure_reason(episode)
        value = reward(episode)
        title = f"#{session(episode)}: {episode.status.replace('_', ' ')}"
        title += f" · reward {value:g}" if value is not None else ""
        title += f" · {reason_label(reason)}" if reason else ""
        token = f' data-reason="{reason_token(key.run, reason)}"' if reason else ""
        marks.append(
            f'<span class="sym st-{escape(episode.status)}"{token} title="{escape(title)}">'
            f"{STATUS_MARKS.get(episode.status, '?')}</span>"
        )
    return "".join(marks)


def group_table(runs: list[Run], groups: dict[GroupKey, list[EpisodeRecord]]) -> str:
    """The table of groups, one row each (the filters read its `data-*`; a click opens the group)."""
    many = len(runs) > 1
    rows = []
    for key, episodes in groups.items():
        statuses = ",".join(e.status for e in episodes)
        reasons = " ".join(sorted({reason_token(key.run, r) for r in map(failure_reason, episodes) if r}))
        text = episode_instruction(episodes)
        mean, std = reward_stats(episodes)
        anchor = group_anchor(key)
        run_cell = f'<td class="domain">{escape(runs[key.run].name)}</td>' if many else ""
        rows.append(
            f'<tr class="task-row" id="row-{anchor}" data-task="{escape(key.id)}"'
            f' data-domain="{escape(key.step_label)}" data-statuses="{escape(statuses)}"'
            f' data-reasons="{reasons}" data-detail="{anchor}"'
            f' data-search="{escape(f"{key.task} {key.uid} {text}".lower())}">{run_cell}'
            f'<td class="domain">{escape(key.step_label)}</td><td class="tid">{escape(key.task)}</td>'
            f'<td class="tid"><a href="#{anchor}">{escape(key.uid)}</a></td>'
            f'<td class="mark">{_marks(key, episodes)}</td>'
            f'<td class="num">{number(mean) if mean is not None else "–"}</td>'
            f'<td class="num">{number(std) if std is not None else "–"}</td>'
            f'<td class="instr" title="{escape(text)}">{escape(text)}</td></tr>'
        )
    run_head = "<th>run</th>" if many else ""
    return (
        f'<div class="table-scroll"><table class="task-table"><thead><tr>{run_head}<th>step</th><th>task</th>'
        "<th>group</th><th>episodes</th><th>mean reward</th><th>std</th><th>instruction</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def group_sections(runs: list[Run], groups: dict[GroupKey, list[EpisodeRecord]], images: Images) -> Iterator[str]:
    """Every group's detail section, with prev / list / next links in table order."""
    keys = list(groups)
    for i, key in enumerate(keys):
        nav = {"list": f"row-{group_anchor(key)}"}
        if i > 0:
            nav["prev"] = group_anchor(keys[i - 1])
        if i + 1 < len(keys):
            nav["next"] = group_anchor(keys[i + 1])
        yield group_section(runs[key.run], key, groups[key], nav, images)
