"""A grounding stand-in for CODA's executor in CPU tests: it clicks the element the planner's thought names, at its
exact centre, in UI-TARS text. A stand-in, not a model: it reads the element table, never the screenshot."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from verl_cua.actions import GUIAction, render_action
from verl_cua.actions.geometry import check_size
from verl_cua.eval.executor import ExecutorReply, ExecutorSettings, ExecutorStats, message_text, register_executor

MIN_UNQUOTED = 2  # an element text shorter than this ("x", "a") is matched only when the thought quotes it
# a quoted span: the opening quote not inside a word (so "don't" opens nothing), the closing one not before a word
_QUOTED = re.compile(r"(?<!\w)'([^'\n]+?)'(?!\w)|(?<!\w)\"([^\"\n]+?)\"(?!\w)|“([^”\n]+?)”|‘([^’\n]+?)’")
_TYPE_VERB = re.compile(r"(?<!press )(?<!hit )\b(?:type|types|typing|input|enter|write|fill in)\b", re.I)
_DONE = re.compile(
    r"\b(?:task|goal|request)\b[^.\n]*?\b(?:is|has been|was)\s+(?:now\s+)?"
    r"(?:done|complete|completed|finished|accomplished)\b"
    r"|\bnothing (?:more|else) to do\b|\bno (?:further|more) actions? (?:is |are )?(?:needed|required)\b",
    re.I,
)
_THOUGHT_HEAD = re.compile(r"^\s*Thought\s*:\s*", re.I)
_ACTION_LINE = re.compile(r"\n[ \t]*Action[ \t]*:")
NO_SCREEN = (1000, 1000)  # the coordinate space an action without coordinates is written in when no screen is known


@register_executor("standin_grounding")
class GroundingStandIn:
    """Executor kind `standin_grounding` (a stand-in, not a model): `act` reads the planner's thought from the final
    assistant message and answers, in `settings.format` (UI-TARS by default), in this order:

    * `finished()` when the thought says the task is done ("the task is complete", "nothing more to do");
    * `type(content='...')` with the first quoted text after a typing verb (type, enter, input, write; not "press
      Enter");
    * a click at the centre of the element the thought names: a quoted string equal to an element's text, name or
      id (case-insensitive, the first such quote), else the longest element text, name or id found in the thought as
      a whole word (at least 2 characters), ties to the first element listed;
    * `wait()` otherwise.

    `observation`: an env `Observation` (its `extra["elements"]` and its screenshot's size are read), a plain list of
    `Element`s, or None. `screen`: the screen size when the observation does not give one (a plain list); `image`: the
    image size the reply will be parsed with (`parse_action(image=...)`), None for the format's own default. The
    coordinates are those of `render_action`, so parsing lands on the centre exactly when the image is at least the
    screen's size, and within 1 px while it is at least half of it on each side.
    """

    def __init__(
        self,
        settings: ExecutorSettings | None = None,
        *,
        screen: tuple[int, int] | None = None,
        image: tuple[int, int] | None = None,
    ):
        self.settings = settings or ExecutorSettings(kind="standin_grounding")
        self.stats = ExecutorStats()
        self.screen = None if screen is None else check_size(tuple(screen), "screen")
        self.image = None if image is None else check_size(tuple(image), "image")

    def act(self, messages: Sequence[Mapping[str, Any]], observation: Any = None) -> ExecutorReply:
        """The action the thought names, as the format's text (see the class docstring)."""
        start = time.perf_counter()
        try:
            elements, screen = observed(observation)
            screen = screen or self.screen
            image = getattr(observation, "image_size", None) or self.image  # the size the reply is parsed against
            action = choose_action(planner_thought(messages), elements)
            if action.x is not None and screen is None:
                raise ValueError("GroundingStandIn: a click needs the screen size: pass an Observation or screen=")
            if screen is None:
                text = render_action([action], format=self.settings.format, screen=NO_SCREEN, image=NO_SCREEN)
            else:
                text = render_action([action], format=self.settings.format, screen=screen, image=image)
        except Exception:
            self.stats.record(time.perf_counter() - start, 1, failed=True)
            raise
        seconds = time.perf_counter() - start
        self.stats.record(seconds, 1, failed=False)
        return ExecutorReply(text, seconds, 1, text)

    async def act_async(self, messages: Sequence[Mapping[str, Any]], observation: Any = None) -> ExecutorReply:
        """`act` in a worker thread, as the HTTP executor does."""
        return await asyncio.to_thread(self.act, messages, observation)

    def close(self) -> None:
        """Nothing to release."""


def planner_thought(messages: Sequence[Mapping[str, Any]]) -> str:
    """The planner's thought: the final assistant message's text up to its `Action:` line, without `Thought:`."""
    if not messages or messages[-1].get("role") != "assistant":
        last = messages[-1].get("role") if messages else "no"
        raise ValueError(
            f"the executor's messages must end with the assistant's '{{thought}}\\nAction: ' message, got {last} "
            "message last"
        )
    text = "\n" + message_text(messages[-1])
    cut = _ACTION_LINE.search(text)
    return _THOUGHT_HEAD.sub("", text[: cut.start()] if cut else text).strip()


def observed(observation: Any) -> tuple[list[Any], tuple[int, int] | None]:
    """The elements and screen size an observation gives: an `Observation`'s `extra["elements"]` and screenshot size,
    a plain list of elements (no size), or nothing for None."""
    if observation is None:
        return [], None
    if isinstance(observation, Sequence) and not isinstance(observation, (str, bytes)):
        return list(observation), None
    extra = getattr(observation, "extra", None)
    if not isinstance(extra, Mapping):
        raise TypeError(
            f"GroundingStandIn reads an Observation (with extra['elements']) or a list of Element, got "
            f"{type(observation).__name__}"
        )
    screen = getattr(observation, "screen", None)
    return list(extra.get("elements") or []), None if screen is None else (int(screen[0]), int(screen[1]))


def choose_action(thought: str, elements: Sequence[Any]) -> GUIAction:
    """The one action the thought asks for (the order of the class docstring), a click at an element's centre."""
    quotes = [(m.start(), next(g for g in m.groups() if g is not None)) for m in _QUOTED.finditer(thought)]
    if _DONE.search(thought):
        return GUIAction("done")
    masked = _QUOTED.sub(lambda m: " " * len(m.group(0)), thought)  # verbs inside quotes ("Enter" button) are names
    verb = _TYPE_VERB.search(masked)
    if verb is not None:
        typed = next((text for at, text in quotes if at >= verb.end()), None)
        if typed is not None:
            return GUIAction("type", text=typed)
    element = named_element(thought, elements, [text for _, text in quotes])
    if element is None:
        return GUIAction("wait")
    x, y, w, h = element.box
    return GUIAction("click", x=int(x + w // 2), y=int(y + h // 2))


def named_element(thought: str, elements: Sequence[Any], quotes: Sequence[str] | None = None) -> Any | None:
    """The element the thought names: by a quoted string first, else by the longest whole-word match (see above)."""
    if quotes is None:
        quotes = [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(thought)]
    for quote in quotes:
        wanted = quote.strip().casefold()
        hit = next((e for e in elements if wanted and wanted in element_names(e)), None)
        if hit is not None:
            return hit
    best, best_len, lowered = None, 0, thought.casefold()
    for element in elements:
        for name in element_names(element):
            if len(name) > best_len and len(name) >= MIN_UNQUOTED and _whole_word(name, lowered):
                best, best_len = element, len(name)
    return best


def element_names(element: Any) -> set[str]:
    """Every name the stand-in matches an element by: its text, name and id, stripped and case-folded."""
    values = (getattr(element, key, "") for key in ("text", "name", "id"))
    return {str(v).strip().casefold() for v in values if v and str(v).strip()}


def _whole_word(name: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None
