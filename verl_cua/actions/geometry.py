"""Screen geometry: the size a model saw (Qwen-VL smart_resize) and mapping its coordinates to screen pixels."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from verl_cua.actions.types import ActionError

MAX_SIDE = 32768
MAX_COORDINATE = 1e6  # beyond any format's range by orders of magnitude: garbage, not a near miss to clamp
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
MARK_NAME = re.compile(r"\s*tag_(\d{1,4})\s*")  # a set-of-marks point, `tag_3`: OSWorld's SoM agents' name for mark 3
MAX_MARKS = 9999  # the marks a screen may number: a name has at most 4 digits
_POINT_TEXT = re.compile(r"\s*[(\[]?\s*-?\d+(?:\.\d+)?(?:\s*,\s*-?\d+(?:\.\d+)?){1,3}\s*[)\]]?\s*")

ResizeLimits = dict[str, int]  # a Qwen-VL processor's smart_resize limits: factor, min_pixels, max_pixels
# Qwen2.5-VL's processor defaults (preprocessor_config.json): patch 14 x merge 2, 4..16384 merged patches.
QWEN25VL_RESIZE: ResizeLimits = {"factor": 28, "min_pixels": 3136, "max_pixels": 12845056}
# UI-TARS-1.5's limits (its OSWorld agent): 100..16384 merged patches of 28 px.
UITARS_RESIZE: ResizeLimits = {"factor": 28, "min_pixels": 100 * 28 * 28, "max_pixels": 16384 * 28 * 28}
# Qwen3-VL's processor: 16 px patches merged 2x2 (factor 32), up to 16384 merged patches by default.
QWEN3VL_RESIZE: ResizeLimits = {"factor": 32, "min_pixels": 64 * 32 * 32, "max_pixels": 16384 * 32 * 32}


def check_size(size: object, what: str) -> tuple[int, int]:
    """Validate a `(width, height)` pair given by the caller; raise ValueError with a one-line reason."""
    if (
        not isinstance(size, (tuple, list))
        or len(size) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in size)
        or not all(0 < v <= MAX_SIDE for v in size)
    ):
        raise ValueError(f"{what} must be (width, height) with positive integers up to {MAX_SIDE}, got {size!r}")
    return int(size[0]), int(size[1])


def check_marks(marks: object) -> dict[int, tuple[int, int]] | None:
    """Validate the set-of-marks centres a caller passes (`{mark: (x, y)}` in screen pixels, or None); ValueError
    with a one-line reason otherwise."""
    if marks is None:
        return None
    if not isinstance(marks, Mapping):
        raise ValueError(f"marks must be a mapping {{mark number: (x, y)}} or None, got {type(marks).__name__}")
    out = {}
    for number, point in marks.items():
        if isinstance(number, bool) or not isinstance(number, int) or not 0 < number <= MAX_MARKS:
            raise ValueError(f"a mark number must be an integer in 1..{MAX_MARKS}, got {number!r:.30}")
        if not (isinstance(point, (tuple, list)) and len(point) == 2 and all(_is_int(v) for v in point)):
            raise ValueError(f"mark {number}'s centre must be (x, y) integers, got {point!r:.40}")
        out[number] = (int(point[0]), int(point[1]))
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _upstream_smart_resize():
    """transformers' own smart_resize (the function Qwen-VL processors apply), imported without torch."""
    quiet = "TRANSFORMERS_VERBOSITY" not in os.environ
    if quiet:  # its "PyTorch was not found" notice is noise on an eval box or desktop host
        os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    try:
        try:  # transformers >= 5: the PIL image processor module needs no torch
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
        except ImportError:  # transformers 4.x
            from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
    except ImportError as exc:
        raise ImportError(
            "qwen25vl/uitars need transformers for Qwen-VL's smart_resize when image= is not given: "
            "pip install 'transformers>=4.49' (or pass image=(width, height))"
        ) from exc
    finally:
        if quiet:
            del os.environ["TRANSFORMERS_VERBOSITY"]
            _restore_transformers_verbosity()
    return smart_resize


def _restore_transformers_verbosity() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_warning()
    except ImportError:
        pass


@lru_cache(maxsize=256)
def smart_resize_size(screen: tuple[int, int], factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """The `(width, height)` a Qwen-VL processor resizes a `screen`-sized screenshot to."""
    width, height = screen
    new_h, new_w = _upstream_smart_resize()(height, width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return int(new_w), int(new_h)


def capped_resize(screen: tuple[int, int], limits: ResizeLimits, max_pixels: int | None = None) -> tuple[int, int]:
    """`smart_resize_size` under a processor's `limits`, its pixel cap lowered to `max_pixels` when given (never
    below its minimum)."""
    limits = dict(limits)
    if max_pixels is not None:
        limits["max_pixels"] = max(limits["min_pixels"], min(limits["max_pixels"], int(max_pixels)))
    return smart_resize_size(tuple(screen), **limits)


@dataclass(frozen=True, slots=True)
class Mark:
    """A point written as a set-of-marks name (`tag_3` in code, `"tag_3"` in JSON and boxes): mark 3's box centre,
    which the coordinate space resolves from the marks of the observation the model acted on."""

    number: int


@dataclass(frozen=True, slots=True)
class CoordinateSpace:
    """Maps a format's coordinates (its own range `width x height`) onto integer screen pixels; `marks`: the
    set-of-marks centres (screen pixels) of the observation being acted on, None where it shows no marks."""

    width: float
    height: float
    screen_w: int
    screen_h: int
    marks: Mapping[int, tuple[int, int]] | None = field(default=None, compare=False, hash=False)

    def mark(self, number: int) -> tuple[int, int]:
        """Mark `number`'s centre in screen pixels; ActionError when the screen shows no such mark."""
        if self.marks is None:
            raise ActionError(f"tag_{number} names a mark, but this screen shows no marks (observation som has them)")
        if number not in self.marks:
            shown = f"tag_1 to tag_{len(self.marks)}" if self.marks else "none"
            raise ActionError(f"tag_{number} is not a mark on this screen (its marks: {shown})")
        x, y = self.marks[number]
        return min(max(int(x), 0), self.screen_w - 1), min(max(int(y), 0), self.screen_h - 1)

    def to_screen(self, x: object, y: object, notes: list[str]) -> tuple[int, int]:
        """Scale one point; clamp into the screen, adding a note to `notes` if the format's range was exceeded."""
        fx, fy = _number(x), _number(y)
        if not (0 <= fx <= self.width and 0 <= fy <= self.height):
            notes.append(
                f"coordinate ({_fmt(fx)}, {_fmt(fy)}) outside 0..{_fmt(self.width)} x 0..{_fmt(self.height)}; clamped"
            )
        return _land(fx, self.width, self.screen_w), _land(fy, self.height, self.screen_h)

    def from_screen(self, px: int, py: int) -> tuple[int, int]:
        """The integer format coordinate whose `to_screen` lands nearest the screen pixel `(px, py)`.

        Exact whenever the format's range is at least as fine as the screen, else within one format unit.
        """
        return _nearest(px, self.width, self.screen_w), _nearest(py, self.height, self.screen_h)

    @property
    def pixel_tolerance(self) -> tuple[int, int]:
        """How far (screen pixels, per axis) a `from_screen` -> `to_screen` round trip may move a point."""
        return _step(self.width, self.screen_w), _step(self.height, self.screen_h)

    def point(self, value: object, notes: list[str]) -> tuple[int, int]:
        """A point given as `[x, y]`, `{"x": .., "y": ..}`, the string `"(x, y)"` (a 4-number box: its centre) or a
        mark (`Mark`, the string `"tag_3"`: its box centre)."""
        if isinstance(value, Mark):
            return self.mark(value.number)
        if isinstance(value, str) and len(value) <= 64 and (named := MARK_NAME.fullmatch(value)):
            return self.mark(int(named.group(1)))
        if isinstance(value, str) and len(value) <= 64 and _POINT_TEXT.fullmatch(value):
            value = _NUMBER.findall(value)
        if isinstance(value, dict) and "x" in value and "y" in value:
            return self.to_screen(value["x"], value["y"], notes)
        if isinstance(value, (list, tuple)):
            if len(value) == 2:
                return self.to_screen(value[0], value[1], notes)
            if len(value) == 4:
                x1, y1, x2, y2 = (_number(v) for v in value)
                return self.to_screen((x1 + x2) / 2, (y1 + y2) / 2, notes)
        raise ActionError(f"coordinate must be [x, y], got {value!r:.60}")


def _land(value: float, extent: float, screen: int) -> int:
    """One format coordinate -> the screen pixel it scales to, clamped onto the screen."""
    pixel = int(math.floor(value * screen / extent + 0.5))
    return min(max(pixel, 0), screen - 1)


def _nearest(pixel: int, extent: float, screen: int) -> int:
    """The format coordinate in 0..extent landing nearest `pixel` (landing is monotone: search round(exact) +-1)."""
    exact = pixel * extent / screen
    guess = int(math.floor(exact + 0.5))
    top = int(math.floor(extent))
    candidates = [c for c in (guess - 1, guess, guess + 1) if 0 <= c <= top] or [min(max(guess, 0), top)]
    return min(candidates, key=lambda c: (abs(_land(float(c), extent, screen) - pixel), abs(c - exact)))


def _step(extent: float, screen: int) -> int:
    return 0 if extent >= screen else math.ceil(screen / extent)


def _number(value: object) -> float:
    if isinstance(value, bool):
        raise ActionError(f"coordinate must be a number, got {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ActionError(f"coordinate must be a number, got {value!r:.40}") from None
    if isinstance(value, int) and abs(value) > MAX_COORDINATE:  # checked before float(): huge ints overflow
        raise ActionError(f"coordinate {str(value)[:20]}... is out of range")
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ActionError(f"coordinate must be a finite number, got {value!r:.40}")
    if abs(value) > MAX_COORDINATE:
        raise ActionError(f"coordinate {value:.4g} is out of range")
    return float(value)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.4g}"
