"""What an agent reads besides the screenshot, for OSWorld's four observation types (`OBSERVATIONS`): the page's or
desktop's elements as a tab-separated table (MiniWoB++'s DOM elements, the AT-SPI accessibility tree), trimmed to a
token budget, and set-of-marks (numbered boxes drawn on the screenshot, a mark resolved to its box's centre).

The accessibility table follows the columns OSWorld's agents show (tag, name, text, class, description, position,
size) and keeps what they keep: visible, showing nodes of an interactive or text-bearing role that have a name or a
text and a box on the screen. Every cell is escaped, so no text on the screen can add a row or a column."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

from PIL import Image, ImageDraw

from verl_cua.actions.geometry import MAX_MARKS
from verl_cua.actions.prompts import TEXT_ONLY
from verl_cua.envs.spec import OBSERVATIONS

STATE_NS = "https://accessibility.ubuntu.example.org/ns/state"
COMPONENT_NS = "https://accessibility.ubuntu.example.org/ns/component"
ATTRIBUTES_NS = "https://accessibility.ubuntu.example.org/ns/attributes"
A11Y_HEADER = ("tag", "name", "text", "class", "description", "position (top-left x&y)", "size (w&h)")
DOM_HEADER = ("tag", "text", "id", "class", "position (top-left x&y)", "size (w&h)")
# roles a reader can act on or read (suffixes and names of AT-SPI roles as the desktop's tree tags them)
ROLE_SUFFIXES = ("item", "button", "heading", "label", "scrollbar", "searchbox", "textbox", "link", "tabelement",
                 "textfield", "textarea", "menu")  # fmt: skip
ROLES = frozenset({"alert", "canvas", "check-box", "combo-box", "entry", "icon", "image", "paragraph", "scroll-bar",
                   "section", "slider", "static", "table-cell", "terminal", "text", "radio-button", "toggle-button",
                   "spin-button", "page-tab"})  # fmt: skip
PAIR = re.compile(r"^\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)$")  # "(x, y)": read by pattern, never evaluated
CELL_CHARS = 200  # a cell is cut to this many characters
DEFAULT_BUDGET = 2000  # tokens of element table per turn (`cua.env.observation_tokens`)
CHARS_PER_TOKEN = 3  # a tokenizer-free count, on the safe side (the trainer's token budget counts the same way)


@dataclass(frozen=True)
class Element:
    """One row of what the agent reads: its role or tag, texts, and box in screenshot pixels."""

    tag: str
    box: tuple[int, int, int, int]  # x, y, width, height
    name: str = ""
    text: str = ""
    id: str = ""
    classes: str = ""
    description: str = ""
    leaf: bool = True  # no element inside it (set-of-marks marks leaves only)

    @property
    def centre(self) -> tuple[int, int]:
        """The box's centre, where a click on the element lands."""
        x, y, w, h = self.box
        return x + w // 2, y + h // 2


def check_observation(value: Any) -> str:
    """`value` if it is one of OSWorld's observation types, else ValueError in one line naming the valid ones."""
    if value in OBSERVATIONS:
        return value
    near = difflib.get_close_matches(str(value), OBSERVATIONS, n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    raise ValueError(f"unknown observation {value!r}{hint}; valid: {', '.join(OBSERVATIONS)}")


def shows_elements(observation: str) -> bool:
    """Whether `observation` puts an element table (or the list of marks) in the prompt."""
    return check_observation(observation) != "screenshot"


def shows_screenshot(observation: str) -> bool:
    """Whether `observation` shows the screenshot (every type but `a11y_tree`)."""
    return check_observation(observation) != TEXT_ONLY


def cell(text: Any) -> str:
    """One table cell: whitespace that could start a row or a column escaped, cut to `CELL_CHARS`."""
    value = str(text or "").replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")
    return value if len(value) <= CELL_CHARS else value[: CELL_CHARS - 3] + "..."


def dom_elements(raw: Iterable[Mapping[str, Any]], area: tuple[int, int], scale: int = 1) -> list[Element]:
    """MiniWoB++'s `dom_elements` (its serialised elements) that show in the task `area` (width, height), their
    boxes cut to it, in the screenshot's pixels (task-area pixels times `scale`)."""
    found = []
    for item in raw:
        left, top, width, height = (_number(item.get(key)) for key in ("left", "top", "width", "height"))
        x0, y0 = max(left, 0.0), max(top, 0.0)
        x1, y1 = min(left + width, float(area[0])), min(top + height, float(area[1]))
        if x1 - x0 < 1 or y1 - y0 < 1:
            continue
        box = (round(x0 * scale), round(y0 * scale), round((x1 - x0) * scale), round((y1 - y0) * scale))
        flags = item.get("flags")
        leaf = bool(flags[3]) if flags is not None and len(flags) > 3 else True
        text = str(item.get("text") or item.get("value") or "")
        found.append(Element(tag=str(item.get("tag", "")), box=box, text=text, id=str(item.get("id", "")),
                             classes=str(item.get("classes", "")), leaf=leaf))  # fmt: skip
    return found


def a11y_elements(xml: str | None) -> list[Element]:
    """The nodes of an AT-SPI tree (the desktop's XML) a reader keeps; an empty or unreadable tree has none."""
    if not xml:
        return []
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return []
    found = []
    for node in root.iter():
        tag = node.tag if isinstance(node.tag, str) else ""
        if not (tag.endswith(ROLE_SUFFIXES) or tag in ROLES or tag.startswith("document")):
            continue
        if node.get(f"{{{STATE_NS}}}showing") != "true" or node.get(f"{{{STATE_NS}}}visible") != "true":
            continue
        name, text = node.get("name", "").strip(), (node.text or "").strip()
        xy, size = _pair(node.get(f"{{{COMPONENT_NS}}}screencoord")), _pair(node.get(f"{{{COMPONENT_NS}}}size"))
        if not (name or text) or xy is None or size is None or min(xy) < 0 or min(size) <= 0:
            continue
        found.append(Element(tag=tag, box=(*xy, *size), name=name, text=text,
                             classes=node.get(f"{{{ATTRIBUTES_NS}}}class", ""),
                             description=node.get(f"{{{ATTRIBUTES_NS}}}description", "")))  # fmt: skip
    return found


def table_rows(elements: Sequence[Element], kind: str) -> list[str]:
    """The header and one row per element: `kind` "a11y" (OSWorld's columns) or "dom" (MiniWoB++'s)."""
    rows = ["\t".join(A11Y_HEADER if kind == "a11y" else DOM_HEADER)]
    for e in elements:
        x, y, w, h = e.box
        texts = (e.name, e.text, e.classes, e.description) if kind == "a11y" else (e.text, e.id, e.classes)
        rows.append("\t".join([cell(e.tag), *map(cell, texts), f"({x}, {y})", f"({w}, {h})"]))
    return rows


def marks(elements: Sequence[Element]) -> list[Element]:
    """The elements set-of-marks numbers, in order: the leaves (a container's box holds its marks), the first
    `MAX_MARKS` of them (a mark's name has at most 4 digits)."""
    return [e for e in elements if e.leaf][:MAX_MARKS]


def mark_rows(elements: Sequence[Element]) -> list[str]:
    """Set-of-marks' list: the header and `[n]` before each of `marks(elements)`, numbered from 1 as drawn."""
    elements = marks(elements)
    rows = ["mark\ttag\ttext\tposition (top-left x&y)\tsize (w&h)"]
    for n, e in enumerate(elements, 1):
        x, y, w, h = e.box
        rows.append(f"[{n}]\t{cell(e.tag)}\t{cell(e.name or e.text or e.id)}\t({x}, {y})\t({w}, {h})")
    return rows


def approx_tokens(text: str) -> int:
    """A tokenizer-free count of `text`'s tokens (`CHARS_PER_TOKEN`), where no tokenizer is given."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def trim(rows: Sequence[str], budget: int, count: Callable[[str], int] = approx_tokens) -> str:
    """`rows` joined, whole rows kept while they fit in `budget` tokens; a cut says where it was made and how many
    rows it left out."""
    kept, used = [], 0
    for i, row in enumerate(rows):
        cost = count(row + "\n")
        if used + cost > budget and i > 0:
            left = len(rows) - i
            return "\n".join(kept) + f"\n[cut at the {budget}-token budget: {left} of {len(rows) - 1} rows left out]"
        kept.append(row)
        used += cost
    return "\n".join(kept)


def draw_marks(image: Image.Image, elements: Sequence[Element]) -> Image.Image:
    """A copy of `image` with each mark's box outlined and numbered (1-based, the order of `mark_rows`)."""
    marked = image.convert("RGB")
    draw = ImageDraw.Draw(marked)
    for n, e in enumerate(marks(elements), 1):
        x, y, w, h = e.box
        draw.rectangle((x, y, x + w - 1, y + h - 1), outline=(255, 0, 0))
        label = str(n)
        lw, lh = 6 * len(label) + 2, 10
        draw.rectangle((x, y, x + lw, y + lh), fill=(255, 0, 0))
        draw.text((x + 1, y - 1), label, fill=(255, 255, 255))
    return marked


def mark_centre(elements: Sequence[Element], mark: int) -> tuple[int, int]:
    """Where a click on mark `mark` (1-based) lands: its box's centre; a mark not on the screen is ValueError."""
    numbered = marks(elements)
    if isinstance(mark, bool) or not isinstance(mark, int) or not 1 <= mark <= len(numbered):
        raise ValueError(f"mark {mark!r} is not on the screen (marks 1..{len(numbered)})")
    return numbered[mark - 1].centre


def table_elements(text: str | None) -> list[Element]:
    """The elements an element table (`observation_text` of `a11y_tree` or `dom` rows, as trajectories keep it) lists,
    read back by pattern; rows that do not parse, the title, header and cut line are skipped; marks give none."""
    lines = (text or "").splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("tag\t")), None)
    if header is None:
        return []
    a11y = lines[header].split("\t") == list(A11Y_HEADER)
    found = []
    for line in lines[header + 1 :]:
        cells = [_uncell(c) for c in line.split("\t")]
        if len(cells) != (len(A11Y_HEADER) if a11y else len(DOM_HEADER)):
            continue
        xy, size = _pair(cells[-2]), _pair(cells[-1])
        if xy is None or size is None:
            continue
        tag, *texts = cells[:-2]
        keys = ("name", "text", "classes", "description") if a11y else ("text", "id", "classes")
        named = dict(zip(keys, texts, strict=True))
        found.append(Element(tag=tag, box=(*xy, *size), **named))
    return found


def _uncell(value: str) -> str:
    """A table cell's text with `cell`'s escapes undone."""
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "r": "\r", "n": "\n"}.get(m.group(1), m.group(1)), value)


def observation_text(observation: str, elements: Sequence[Element], kind: str, budget: int = DEFAULT_BUDGET,
                     count: Callable[[str], int] = approx_tokens) -> str | None:  # fmt: skip
    """The text `observation` adds beside (or instead of) the screenshot: the element table (`a11y_tree`,
    `screenshot_a11y_tree`) or the marks (`som`), trimmed to `budget` tokens; None for `screenshot`."""
    if not shows_elements(observation):
        return None
    rows = mark_rows(elements) if observation == "som" else table_rows(elements, kind)
    title = "Marks on the screenshot:" if observation == "som" else "Elements on the screen:"
    return f"{title}\n{trim(rows, budget, count)}"


def _pair(value: str | None) -> tuple[int, int] | None:
    match = PAIR.match(value or "")
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def _number(value: Any) -> float:
    """A MiniWoB++ coordinate: a float or a one-element array of one."""
    try:
        return float(value[0] if hasattr(value, "__len__") else value)
    except (TypeError, ValueError, IndexError):
        return 0.0


def with_elements(observation: str, image: Image.Image, elements: Sequence[Element], kind: str,
                  budget: int = DEFAULT_BUDGET) -> tuple[Image.Image, dict[str, Any]]:  # fmt: skip
    """What an env adds to an observation of type `observation` (not `screenshot`): the screenshot (marked for
    `som`) and the `extra` keys `elements` (their boxes) and `elements_text` (the table or marks, trimmed)."""
    text = observation_text(observation, elements, kind, budget)
    extra = {"observation": observation, "elements": list(elements), "elements_text": text}
    if observation != "som":
        return image, extra
    centres = {n: e.centre for n, e in enumerate(marks(elements), 1)}
    return draw_marks(image, elements), {**extra, "marks": centres}


def observation_type(extra: Mapping[str, Any] | None) -> str:
    """The observation type an observation's `extra` was made for (`with_elements` names it); `screenshot` else."""
    return str((extra or {}).get("observation") or "screenshot")


def element_rows(table: str) -> list[str]:
    """A table's element rows: without its title, header and cut line."""
    lines = table.splitlines()[2:]
    return [line for line in lines if not line.startswith("[cut at the ")]


def table_diff(before: str, after: str) -> str:
    """The rows a step removed from (`- `) and added to (`+ `) the screen's element table; "" when it changed none."""
    old, new = element_rows(before), element_rows(after)
    kept_old, kept_new = set(new), set(old)
    lines = [f"- {row}" for row in old if row not in kept_old] + [f"+ {row}" for row in new if row not in kept_new]
    return "\n".join(lines)


def tree_feedback(reads: Sequence[str | None]) -> str:
    """What SDPO's teacher is told of the screen's elements at the end of a failed attempt (`reads`: the table or
    marks of each observation, the first one's and each step's after): the last step's diff, or the final table
    where that step changed none; "" without a table."""
    if not reads or not reads[-1]:
        return ""
    final = reads[-1]
    diff = table_diff(reads[-2], final) if len(reads) > 1 and reads[-2] else ""
    if diff:
        return f"The last step changed the screen's elements:\n{diff}"
    return "The screen's elements at the end:\n" + "\n".join(final.splitlines()[1:])
