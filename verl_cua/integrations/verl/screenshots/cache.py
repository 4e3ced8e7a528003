"""Screenshots expanded once a step, not once a pass: a rank's cache of processor outputs keyed by the PNG's digest.

A step's screenshots come back many times on each rank: the history puts every screenshot in up to three rows, and
the old log-probs, SDPO's two passes and the update each expand every row again. Expanding (PNG decode + the image
processor, ~60-80 ms of one CPU thread for a 1312x736 screenshot) runs while the GPU waits.

- What is kept: each screenshot's `pixel_values` and grid under its digest, in the engine's compute dtype (bf16 on
  the GPU: the model casts the patches to it before its first operation, so the values it sees are the same; 11 MiB
  for a 1312x736 screenshot), within a byte budget per rank (`VERL_CUA_IMAGE_CACHE_GIB`, default 8: ~740 such
  screenshots, a flagship step's on a rank; 0 turns it off).
- What goes first: entries of earlier batches, least recently used first. A batch's own entries are never evicted
  for it: when one batch holds more screenshots than fit, the ones past the budget are used and not kept, so passes
  that read the same screenshots in the same order still hit on those kept (plain LRU would miss on every one).
- Memory: kept patches live in fixed-size slots cut from a few large blocks, and the heap's freed pages go back
  to the system after each micro-batch that expanded any and at each batch (`malloc_trim`): the processor's large
  temporaries, freed among kept entries, otherwise stayed resident (2.5x the cache in the bench).
- Prefetch (`VERL_CUA_IMAGE_PREFETCH=1`, off by default): at the start of a batch a background thread expands its
  screenshots in order while the GPU runs the first micro-batches, and stops where the budget ends; a screenshot
  the forward needs before the thread reached it is expanded on the spot (its queued job is cancelled). On a
  2-core machine the thread cost more CPU and memory (a second malloc arena) than it saved: measure it on yours."""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

BUDGET_ENV = "VERL_CUA_IMAGE_CACHE_GIB"
DEFAULT_GIB = 8.0
PREFETCH_ENV = "VERL_CUA_IMAGE_PREFETCH"  # "1": expand a batch's screenshots on a background thread

Expanded = tuple  # (pixel_values [patches, dim], image_grid_thw [1, 3]): torch tensors; no torch import here, the
# doctor reads the budget on machines without it


def budget_bytes() -> int:
    """The cache's byte budget per rank from `VERL_CUA_IMAGE_CACHE_GIB` (default 8 GiB)."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    try:
        gib = float(raw) if raw else DEFAULT_GIB
    except ValueError:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: expected a number of GiB (0 turns the screenshot cache off)") from None
    if gib < 0:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: expected a number of GiB >= 0 (0 turns the screenshot cache off)")
    return int(gib * 2**30)


def release_freed_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc's malloc_trim; nothing elsewhere): the processor's large
    temporaries, freed among kept entries, otherwise stay resident and tripled a rank's memory in the bench."""
    global _trim
    if _trim is None:
        try:
            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None


def prefetch_enabled() -> bool:
    """Whether `VERL_CUA_IMAGE_PREFETCH=1` asks for the background expansion (off by default)."""
    raw = os.environ.get(PREFETCH_ENV, "0").strip()
    if raw not in ("0", "1", ""):
        raise ValueError(f"{PREFETCH_ENV}={raw!r}: expected 1 (expand on a background thread) or 0 (in the forward)")
    return raw == "1"


def digest(data: bytes) -> bytes:
    """The cache key of a PNG."""
    return hashlib.blake2b(bytes(data), digest_size=16).digest()


class _Slots:
    """Fixed-size slots cut from a few large blocks, for the kept patches: entries that come and go never fragment
    the heap (kept 11 MiB entries among freed 22 MiB processor outputs tripled a rank's resident memory)."""

    PER_BLOCK = 32

    def __init__(self, max_bytes: int, dtype: Any):
        self.max_bytes, self.dtype = max_bytes, dtype
        self.numel = 0  # elements a slot holds: the first entry's (a run's screenshots share one size)
        self._blocks: list[Any] = []
        self._free: list[tuple[int, int]] = []
        self._allocated = 0

    @property
    def slot_bytes(self) -> int:
        """Bytes of one slot."""
        import torch

        return self.numel * torch.empty((), dtype=self.dtype).element_size()

    def fits(self, patches: Any) -> bool:
        """Whether `patches` fit a slot (the first entry sets the slot size)."""
        if not self.numel:
            self.numel, self.dtype = patches.numel(), self.dtype or patches.dtype
        return patches.numel() <= self.numel and self.slot_bytes <= self.max_bytes

    def can_grow(self) -> bool:
        """Whether one more slot can be allocated within the budget."""
        return (self._allocated + 1) * self.slot_bytes <= self.max_bytes

    def take(self, patches: Any) -> tuple[Any, tuple[int, int]] | None:
        """`patches` copied (and cast) into a free slot or a newly allocated one; None when neither exists."""
        import torch

        if not self._free:
            if not self.can_grow():
                return None
            count = max(1, min(self.PER_BLOCK, self.max_bytes // self.slot_bytes - self._allocated))
            self._blocks.append(torch.empty(count * self.numel, dtype=self.dtype))
            self._free += [(len(self._blocks) - 1, i) for i in range(count)]
            self._allocated += count
        block, index = self._free.pop()
        view = self._blocks[block][index * self.numel : index * self.numel + patches.numel()].view(patches.shape)
        view.copy_(patches)
        return view, (block, index)

    def give(self, slot: tuple[int, int]) -> None:
        """A slot back to the free list."""
        self._free.append(slot)


class ScreenshotCache:
    """Expanded screenshots by PNG digest, within a byte budget; thread-safe; `stats` counts hits and expansions."""

    def __init__(self, expand_one: Callable[[bytes], Expanded], max_bytes: int, dtype: Any = None):
        self._expand_one, self.max_bytes, self.dtype = expand_one, max_bytes, dtype
        self._entries: OrderedDict[bytes, Expanded] = OrderedDict()
        self._slot_of: dict[bytes, tuple[int, int]] = {}
        self._batch_of: dict[bytes, int] = {}  # the last batch that used each entry
        self._pending: dict[bytes, Future] = {}
        self._slots = _Slots(max_bytes, dtype)
        self._batch = 0
        self._made_since_release = False
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self.stats = {"hits": 0, "expanded": 0, "prefetched": 0, "evicted": 0, "not_kept": 0}

    def get(self, data: bytes) -> Expanded:
        """The screenshot's processor output: cached, or being prefetched (waited for), or expanded now."""
        key = digest(data)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._touch(key)
                self.stats["hits"] += 1
                return hit
            future = self._pending.get(key)
            if future is not None and future.cancel():
                self._pending.pop(key, None)
                future = None
        if future is not None:
            result = future.result()  # the thread is expanding it right now (None: it found no room and skipped)
            if result is not None:
                with self._lock:
                    self.stats["hits"] += 1
                return result
        made = self._expand_one(data)
        with self._lock:
            self.stats["expanded"] += 1
            kept = self._store(key, made)
        self._made_since_release = True
        return kept if kept is not None else self._shrink(made)

    def release(self) -> None:
        """After a micro-batch: give the heap's freed pages back if screenshots were expanded since the last time."""
        if self._made_since_release:
            self._made_since_release = False
            release_freed_memory()

    def prefetch(self, pngs: Iterable[bytes]) -> int:
        """Start a new batch (its cached screenshots kept for it) and queue the rest in order; how many were queued."""
        if self.max_bytes <= 0:
            return 0
        queued = 0
        release_freed_memory()
        with self._lock:
            self._batch += 1
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verl-cua-screenshots")
            for data in pngs:
                key = digest(data)
                if key in self._entries:
                    self._touch(key)
                elif key not in self._pending:
                    self._pending[key] = self._worker.submit(self._prefetch_one, key, data, self._batch)
                    queued += 1
        return queued

    def _prefetch_one(self, key: bytes, data: bytes, batch: int) -> Expanded | None:
        with self._lock:
            if batch != self._batch or not self._room():
                self._pending.pop(key, None)  # a newer batch, or the budget ends here: the forward makes it
                return None
        try:
            made = self._expand_one(data)
        except BaseException:
            with self._lock:
                self._pending.pop(key, None)
            raise
        with self._lock:
            self._pending.pop(key, None)
            self.stats["prefetched"] += 1
            kept = self._store(key, made)
        self._made_since_release = True
        return kept if kept is not None else self._shrink(made)

    def _shrink(self, value: Expanded) -> Expanded:
        """The patches in the compute dtype (the model's first operation casts them to it)."""
        if self.dtype is None or value[0].dtype == self.dtype:
            return value
        return value[0].to(self.dtype), value[1]

    def _touch(self, key: bytes) -> None:
        self._entries.move_to_end(key)
        self._batch_of[key] = self._batch

    def _evictable(self) -> bytes | None:
        """The least recently used entry of an earlier batch (lock held)."""
        return next((k for k in self._entries if self._batch_of.get(k, 0) < self._batch), None)

    def _room(self) -> bool:
        """Whether one more entry can be kept without evicting this batch's own (lock held)."""
        return bool(self._slots._free) or self._slots.can_grow() or self._evictable() is not None

    def _store(self, key: bytes, value: Expanded) -> Expanded | None:
        """Keep a copy of `value` in a slot, evicting earlier batches' entries (least recently used first) for one;
        None when only this batch's entries are left (the value is used and not kept) (lock held)."""
        if key in self._entries:
            return self._entries[key]
        if self.max_bytes <= 0 or not self._slots.fits(value[0]):
            self.stats["not_kept"] += 1
            return None
        taken = self._slots.take(value[0])
        while taken is None:
            old = self._evictable()
            if old is None:
                self.stats["not_kept"] += 1
                return None
            self._entries.pop(old)
            self._batch_of.pop(old, None)
            self._slots.give(self._slot_of.pop(old))
            self.stats["evicted"] += 1
            taken = self._slots.take(value[0])
        view, slot = taken
        self._entries[key] = (view, value[1])
        self._slot_of[key] = slot
        self._batch_of[key] = self._batch
        return self._entries[key]

    @property
    def nbytes(self) -> int:
        """Bytes of patches held (their slots)."""
        return len(self._entries) * self._slots.slot_bytes if self._entries else 0

    def __len__(self) -> int:
        return len(self._entries)
