"""Screenshots expanded once a step, not once a pass: a rank's cache of processor outputs keyed by the PNG's digest.

A step's screenshots come back many times on each rank: the history puts every screenshot in up to three rows, and
the old log-probs, SDPO's two passes and the update each expand every row again. Expanding (PNG decode + the image
processor, ~60-80 ms of one CPU thread for a 1312x736 screenshot) runs while the GPU waits. The cache keeps each
screenshot's `pixel_values` (fp32, as the processor made them: the model sees the same bits) and grid under its
digest, least recently used out first within a byte budget (`VERL_CUA_IMAGE_CACHE_GIB`, default 4 per rank; 0 turns
it off). `prefetch` expands a batch's screenshots on a background thread while the GPU runs the first micro-batches;
a screenshot the forward needs before the thread reached it is expanded on the spot (its queued job is cancelled)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

BUDGET_ENV = "VERL_CUA_IMAGE_CACHE_GIB"
DEFAULT_GIB = 4.0

Expanded = tuple  # (pixel_values [patches, dim], image_grid_thw [1, 3]): torch tensors; no torch import here, the
# doctor reads the budget on machines without it


def budget_bytes() -> int:
    """The cache's byte budget per rank from `VERL_CUA_IMAGE_CACHE_GIB` (default 4 GiB)."""
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


class ScreenshotCache:
    """Expanded screenshots by PNG digest, within a byte budget; thread-safe; `stats` counts hits and expansions."""

    def __init__(self, expand_one: Callable[[bytes], Expanded], max_bytes: int):
        self._expand_one, self.max_bytes = expand_one, max_bytes
        self._entries: OrderedDict[bytes, Expanded] = OrderedDict()
        self._pending: dict[bytes, Future] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self.stats = {"hits": 0, "expanded": 0, "prefetched": 0, "evicted": 0}

    def get(self, data: bytes) -> Expanded:
        """The screenshot's processor output: cached, or being prefetched (waited for), or expanded now."""
        key = digest(data)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.stats["hits"] += 1
                return hit
            future = self._pending.get(key)
            if future is not None and future.cancel():
                self._pending.pop(key, None)
                future = None
        if future is not None:
            result = future.result()  # the thread is expanding it right now
            with self._lock:
                self.stats["hits"] += 1
            return result
        result = self._expand_one(data)
        with self._lock:
            self.stats["expanded"] += 1
            self._store(key, result)
        return result

    def prefetch(self, pngs: Iterable[bytes]) -> int:
        """Queue the screenshots not yet cached for expansion on the background thread; how many were queued."""
        if self.max_bytes <= 0:
            return 0
        queued = 0
        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verl-cua-screenshots")
            for data in pngs:
                key = digest(data)
                if key in self._entries or key in self._pending:
                    continue
                self._pending[key] = self._worker.submit(self._prefetch_one, key, data)
                queued += 1
        return queued

    def _prefetch_one(self, key: bytes, data: bytes) -> Expanded:
        try:
            result = self._expand_one(data)
        except BaseException:
            with self._lock:
                self._pending.pop(key, None)
            raise
        with self._lock:
            self._pending.pop(key, None)
            self.stats["prefetched"] += 1
            self._store(key, result)
        return result

    def _store(self, key: bytes, value: Expanded) -> None:
        """Keep `value` unless it alone exceeds the budget; evict the least recently used beyond it (lock held)."""
        size = value[0].numel() * value[0].element_size()
        if size > self.max_bytes or key in self._entries:
            return
        self._entries[key] = value
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (old, _) = self._entries.popitem(last=False)
            self._bytes -= old.numel() * old.element_size()
            self.stats["evicted"] += 1

    @property
    def nbytes(self) -> int:
        """Bytes of patches held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
