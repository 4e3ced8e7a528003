"""The compact view of a detail: one filmstrip per episode (small thumbnails, the action drawn, aligned by turn),
click a thumbnail to expand its step; the page's script fills the thumbnails from the full grid's screenshots, so
no image is in the page twice. Long episodes open compact, a toggle switches to the full grid."""

from __future__ import annotations

from html import escape

from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.viewer.overlay import describe_step
from verl_cua.viewer.runs import step_advantage, step_valid

COMPACT_AFTER = 5  # a detail whose longest episode has more steps opens as filmstrips
CAPTION_CHARS = 14


def _thumb(column: int, step: str, caption: str, title: str, css: str = "", corner: str = "") -> str:
    return (
        f'<button type="button" class="thumb{css}" data-col="{column}" data-step="{step}" title="{escape(title)}">'
        f'{corner}<span class="tcap">{caption}</span></button>'
    )


def _advantage(value: object) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return ""
    css = "pos" if value > 0 else "neg" if value < 0 else "zero"
    return f'<span class="tadv {css}">adv {value:+.2f}</span>'


def filmstrip(column: int, label: str, episode: EpisodeRecord | None) -> str:
    """One episode's strip: its label, a thumbnail per step (number, action, advantage) and the final screen."""
    thumbs = []
    for index, step in enumerate(episode.steps if episode else []):
        action = describe_step(step, CAPTION_CHARS)
        valid = step_valid(step) is not False
        caption = f"{index + 1} <code>{escape(action)}</code>"
        title = f"step {index + 1}: {describe_step(step)}"
        corner = _advantage(step_advantage(episode, index))
        thumbs.append(_thumb(column, str(index + 1), caption, title, "" if valid else " invalid", corner))
    if episode is not None and (episode.result or {}).get("final_screenshot"):
        thumbs.append(_thumb(column, "end", "end", "the final screen"))
    body = "".join(thumbs) or '<span class="empty-note">no steps</span>'
    head = f'<div class="strip-head">{label}</div>'
    return f'<div class="strip" data-col="{column}">{head}<div class="thumbs">{body}</div></div>'


def views(grid: str, strips: list[str], longest: int) -> str:
    """The grid and the filmstrips with the toggle between them; compact when `longest` exceeds `COMPACT_AFTER`."""
    compact = longest > COMPACT_AFTER
    toggle = (
        f'<label class="mode"><input type="checkbox" class="compact-toggle"{" checked" if compact else ""}> '
        "compact filmstrip</label>"
    )
    strip_box = f'<div class="strips">{"".join(strips)}<div class="expanded" hidden></div></div>'
    return f'<div class="views{" compact" if compact else ""}">{toggle}{strip_box}{grid}</div>'
