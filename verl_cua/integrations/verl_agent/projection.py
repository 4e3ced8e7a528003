"""verl-agent's projection step for GUI envs: model texts -> parsed actions and 0/1 validity flags."""

from __future__ import annotations

from collections.abc import Sequence

from verl_cua.actions import ParsedAction, parse_action


def gui_projection(
    text_actions: Sequence[str],
    *,
    format: str,
    screens: Sequence[tuple[int, int]],
    images: Sequence[tuple[int, int]],
    marks: Sequence[dict | None] | None = None,
) -> tuple[list[ParsedAction], list[int]]:
    """Parse each text with `format` into its env's `screen` from the `image` size the model saw; never raises
    (an unparseable text is an invalid action, flag 0); `marks`: each env's set-of-marks centres, for `tag_N`."""
    if not len(text_actions) == len(screens) == len(images):
        raise ValueError(f"{len(text_actions)} texts for {len(screens)} envs")
    marks = [None] * len(screens) if marks is None else marks
    actions = [
        parse_action(text, format=format, screen=screen, image=image, marks=shown)
        for text, screen, image, shown in zip(text_actions, screens, images, marks, strict=True)
    ]
    return actions, [int(a.valid) for a in actions]
