"""The engine's screenshot cache: each screenshot of a step is expanded once on a rank however many rows and passes
hold it, the patches are the uncached ones bit for bit, the background prefetch never makes the forward wait behind
its queue, and the byte budget holds (least recently used out first; 0 turns it off)."""

import threading
import time
from types import SimpleNamespace

import pytest
import torch
from PIL import Image, ImageDraw
from tensordict import TensorDict
from transformers import AutoProcessor
from verl.utils import tensordict_utils as tu
from verl.utils.model import extract_multi_modal_inputs

from verl_cua.integrations.verl.screenshots.cache import (
    BUDGET_ENV,
    PREFETCH_ENV,
    ScreenshotCache,
    budget_bytes,
    prefetch_enabled,
)
from verl_cua.integrations.verl.screenshots.compact import compact, expand, expand_one, image_grid, png_bytes
from verl_cua.integrations.verl.screenshots.engine import CompactImagesMixin


def _screens(n, size=(224, 168)):
    out = []
    for i in range(n):
        image = Image.new("RGB", size, (30 * i, 90, 200 - 30 * i))
        ImageDraw.Draw(image).rectangle((10 + 9 * i, 12, 90, 60), fill=(250, 250, 250), outline=(0, 0, 0))
        out.append(image)
    return out


class _Counting:
    """The image processor, counting the images it is given."""

    def __init__(self, inner):
        self.inner, self.images = inner, 0

    def __call__(self, images, **kwargs):
        self.images += len(images)
        return self.inner(images=images, **kwargs)


class _Base:
    """verl's micro-batch loop and input preparation, reduced: micro-batches of two rows, whose multi-modal inputs
    verl's own `extract_multi_modal_inputs` merges (model inputs, output args)."""

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        return [self.prepare_model_inputs(data[i : i + 2])[0] for i in range(0, data.batch_size[0], 2)]

    def prepare_model_inputs(self, micro_batch):
        return extract_multi_modal_inputs(tu.get(micro_batch, "multi_modal_inputs")), {}


def _engine(processor):
    class Engine(CompactImagesMixin, _Base):
        model_config = SimpleNamespace(processor=processor)

    return Engine()


@pytest.fixture
def episode(tiny_model):
    """An episode's step rows with a history of 3 screenshots, stored compact, and the counting processor."""
    _family, path = tiny_model
    real = AutoProcessor.from_pretrained(path).image_processor
    shots = _screens(5)
    rows = [shots[max(0, t - 2) : t + 1] for t in range(5)]  # 1, 2, 3, 3, 3 screenshots: 12 in all, 5 distinct
    stored = [compact({"image_grid_thw": torch.cat([image_grid(s, real) for s in r])}, r) for r in rows]
    return SimpleNamespace(image_processor=_Counting(real)), real, stored


def _batch(stored):
    batch = TensorDict({"input_ids": torch.zeros(len(stored), 3)}, batch_size=[len(stored)])
    tu.assign_non_tensor_stack(batch, "multi_modal_inputs", [dict(s) for s in stored])
    return batch


@pytest.mark.parametrize("prefetch", ["0", "1"])
def test_each_screenshot_is_expanded_once_across_rows_and_passes_with_the_same_patches(episode, monkeypatch, prefetch):
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    monkeypatch.setenv(PREFETCH_ENV, prefetch)
    processor, real, stored = episode
    engine = _engine(processor)
    rows = [expand(s, real) for s in stored]  # verl's merge of each micro-batch's rows, expanded without the cache
    want = [extract_multi_modal_inputs(rows[i : i + 2]) for i in range(0, len(rows), 2)]
    for _pass in ("old_log_probs", "student_topk", "teacher_gather", "update"):
        got = engine.forward_backward_batch(_batch(stored), None)
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g["pixel_values"], w["pixel_values"])
            assert torch.equal(g["image_grid_thw"], w["image_grid_thw"])
    assert processor.image_processor.images == 5  # not 4 passes x 12
    stats = engine._cua_cache.stats
    assert stats["prefetched"] + stats["expanded"] == 5  # made once, by the forward or the background thread
    assert stats["prefetched"] == 0 if prefetch == "0" else engine._cua_cache._worker is not None
    assert stats["hits"] + stats["expanded"] == 4 * 12  # every other lookup found it made


def test_a_zero_budget_turns_the_cache_off_and_every_pass_expands_again(episode, monkeypatch):
    monkeypatch.setenv(BUDGET_ENV, "0")
    processor, real, stored = episode
    engine = _engine(processor)
    for _pass in range(2):
        got = engine.forward_backward_batch(_batch(stored), None)
    assert engine._cua_cache is None and processor.image_processor.images == 2 * 12
    assert torch.equal(got[-1]["pixel_values"], expand(stored[-1], real)["pixel_values"])  # the lone last row


def _fake_cache(max_entries):
    """A cache of 1 KiB fake expansions with room for `max_entries`, counting what it makes."""
    made = []

    def make(data):
        made.append(data)
        return torch.zeros(256), torch.tensor([[1, 1, 1]])

    return ScreenshotCache(make, max_bytes=max_entries * 1024), made


def test_earlier_batches_go_first_least_recently_used_and_a_batch_keeps_its_own():
    cache, made = _fake_cache(2)
    cache.prefetch([]), cache.get(b"a"), cache.get(b"b"), cache.get(b"a")
    cache.get(b"c")  # full of this batch's own: used, not kept
    assert len(cache) == 2 and cache.stats["not_kept"] == 1 and cache.stats["evicted"] == 0
    cache.prefetch([])  # the next batch
    cache.get(b"a")  # now this batch's
    cache.get(b"c")  # evicts b: of an earlier batch, least recently used
    assert cache.stats["evicted"] == 1 and made == [b"a", b"b", b"c", b"c"]
    cache.get(b"a"), cache.get(b"c")
    assert made == [b"a", b"b", b"c", b"c"]  # both kept


def test_passes_over_more_screenshots_than_fit_still_hit_on_those_kept():
    """Four passes over 5 screenshots in the same order with room for 3: plain LRU would miss on all 20."""
    cache, made = _fake_cache(3)
    shots = [bytes([i]) for i in range(5)]
    for _pass in range(4):
        cache.prefetch([])
        for shot in shots:
            cache.get(shot)
    assert len(made) == 5 + 3 * 2 and cache.stats["hits"] == 3 * 3


def test_patches_are_kept_in_the_compute_dtype():
    cache = ScreenshotCache(lambda data: (torch.ones(4, 2), torch.tensor([[1, 2, 2]])), 2**20, torch.bfloat16)
    first, again = cache.get(b"x"), cache.get(b"x")
    assert first[0].dtype == again[0].dtype == torch.bfloat16 and cache.nbytes == 4 * 2 * 2


def test_the_prefetch_stops_where_the_budget_ends(episode):
    _processor, real, stored = episode
    one = expand_one(stored[0]["cua_images"][0], real)[0]
    made = []

    def counting(data):
        made.append(data)
        return expand_one(data, real)

    cache = ScreenshotCache(counting, max_bytes=2 * one.numel() * one.element_size())
    pngs = [data for row in stored for data in row["cua_images"]]
    cache.prefetch(pngs)
    for data in pngs:
        cache.get(data)
    assert cache.stats["prefetched"] <= 2 + 1  # the first two, and at most one that raced the budget's end
    # kept: the first two screenshots; the other three are made at each use (3 + 2 + 1 uses), never evicting them;
    # one more when the thread made a third before it knew the budget was spent
    assert len(made) in (8, 9)
    assert len(cache) == 2 and cache.stats["evicted"] == 0


def test_the_forward_never_waits_behind_the_prefetch_queue():
    """A screenshot the forward needs before the background thread reached it is expanded on the spot (its queued
    job cancelled); one the thread is expanding is waited for, not expanded twice."""
    started, release, made = threading.Event(), threading.Event(), []

    def slow(data):
        if data == b"first":
            started.set()
            release.wait(10)
        made.append(data)
        return torch.full((4, 2), float(len(data))), torch.tensor([[1, 2, 2]])

    cache = ScreenshotCache(slow, max_bytes=2**20)
    assert cache.prefetch([b"first", b"second", b"third"]) == 3
    assert started.wait(10)
    t0 = time.monotonic()
    assert cache.get(b"third")[0][0, 0] == 5.0  # queued behind "first": made here, now
    assert time.monotonic() - t0 < 5
    release.set()
    assert cache.get(b"first")[0][0, 0] == 5.0  # was running: waited for
    assert cache.get(b"second")[0][0, 0] == 6.0
    assert sorted(made) == [b"first", b"second", b"third"]  # each made once
    assert cache.prefetch([b"first", b"second"]) == 0  # cached: nothing queued


@pytest.mark.parametrize("raw", ["lots", "-1"])
def test_a_bad_budget_is_one_line_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv(BUDGET_ENV, raw)
    with pytest.raises(ValueError, match=f"^{BUDGET_ENV}=.*0 turns the screenshot cache off") as err:
        budget_bytes()
    assert "\n" not in str(err.value)


def test_a_png_of_equal_pixels_hits_the_same_entry():
    image = _screens(1)[0]
    cache = ScreenshotCache(lambda data: (torch.zeros(1, 1), torch.tensor([[1, 1, 1]])), max_bytes=2**20)
    cache.get(png_bytes(image)), cache.get(png_bytes(image.copy()))
    assert cache.stats == {"hits": 1, "expanded": 1, "prefetched": 0, "evicted": 0, "not_kept": 0}


def test_prefetch_is_off_unless_asked_and_a_bad_value_is_one_line(monkeypatch):
    monkeypatch.delenv(PREFETCH_ENV, raising=False)
    assert prefetch_enabled() is False
    monkeypatch.setenv(PREFETCH_ENV, "1")
    assert prefetch_enabled() is True
    monkeypatch.setenv(PREFETCH_ENV, "yes")
    with pytest.raises(ValueError, match=f"^{PREFETCH_ENV}='yes': expected 1"):
        prefetch_enabled()


def test_kept_patches_share_a_few_blocks_and_evicted_slots_are_reused():
    cache, made = _fake_cache(3)
    for batch in range(4):
        cache.prefetch([])
        for i in range(3):
            cache.get(bytes([batch, i]))
    assert len(cache._slots._blocks) == 1 and cache._slots._allocated == 3  # 12 entries through 3 slots
    assert cache.stats["evicted"] == 9 and len(made) == 12
