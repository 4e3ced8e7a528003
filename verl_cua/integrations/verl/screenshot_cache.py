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
- Prefetch: at the start of a batch a background thread expands its screenshots in order while the GPU runs the
  first micro-batches, and stops where the budget ends. A screenshot the forward needs before the thread reached
  it is expanded on the spot (its queued job is cancelled)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

BUDGET_ENV = "VERL_CUA_IMAGE_CACHE_GIB"
DEFAULT_GIB = 8.0

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


def digest(data: bytes) -> bytes:
    """The cache key of a PNG."""
    return hashlib.blake2b(bytes(data), digest_size=16).digest()


def _nbytes(value: Expanded) -> int:
    return value[0].numel() * value[0].element_size()


class ScreenshotCache:
    """Expanded screenshots by PNG digest, within a byte budget; thread-safe; `stats` counts hits and expansions."""

    def __init__(self, expand_one: Callable[[bytes], Expanded], max_bytes: int, dtype: Any = None):
        self._expand_one, self.max_bytes, self.dtype = expand_one, max_bytes, dtype
        self._entries: OrderedDict[bytes, Expanded] = OrderedDict()
        self._batch_of: dict[bytes, int] = {}  # the last batch that used each entry
        self._pending: dict[bytes, Future] = {}
        self._bytes = self._batch = self._entry_size = 0
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
        result = self._shrink(self._expand_one(data))
        with self._lock:
            self.stats["expanded"] += 1
            self._store(key, result)
        return result

    def prefetch(self, pngs: Iterable[bytes]) -> int:
        """Start a new batch (its cached screenshots kept for it) and queue the rest in order; how many were queued."""
        if self.max_bytes <= 0:
            return 0
        queued = 0
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
            if batch != self._batch or not self._room_for(self._entry_size):
                self._pending.pop(key, None)  # a newer batch, or the budget ends here: the forward makes it
                return None
        try:
            result = self._shrink(self._expand_one(data))
        except BaseException:
            with self._lock:
                self._pending.pop(key, None)
            raise
        with self._lock:
            self._pending.pop(key, None)
            self.stats["prefetched"] += 1
            self._store(key, result)
        return result

    def _shrink(self, value: Expanded) -> Expanded:
        """The patches in the compute dtype (the model's first operation casts them to it)."""
        if self.dtype is None or value[0].dtype == self.dtype:
            return value
        return value[0].to(self.dtype), value[1]

    def _touch(self, key: bytes) -> None:
        self._entries.move_to_end(key)
        self._batch_of[key] = self._batch

    def _room_for(self, size: int) -> bool:
        """Whether `size` more bytes fit once every entry of earlier batches is gone (lock held)."""
        evictable = sum(_nbytes(v) for k, v in self._entries.items() if self._batch_of.get(k, 0) < self._batch)
        return self._bytes - evictable + size <= self.max_bytes

    def _store(self, key: bytes, value: Expanded) -> None:
        """Keep `value`, evicting earlier batches' entries (least recently used first) to make room; when only this
        batch's entries are left and it does not fit, it is used and not kept (lock held)."""
        size = _nbytes(value)
        self._entry_size = max(self._entry_size, size)
        if key in self._entries:
            return
        if not self._room_for(size):
            self.stats["not_kept"] += 1
            return
        while self._bytes + size > self.max_bytes:
            old = next(k for k in self._entries if self._batch_of.get(k, 0) < self._batch)
            self._bytes -= _nbytes(self._entries.pop(old))
            self._batch_of.pop(old, None)
            self.stats["evicted"] += 1
        self._entries[key] = value
        self._batch_of[key] = self._batch
        self._bytes += size

    @property
    def nbytes(self) -> int:
        """Bytes of patches held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
