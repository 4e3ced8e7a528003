"""Compact screenshots: the rollout worker stores PNGs where verl stores fp32 patches, and the engine's expansion
gives back exactly verl's own `multi_modal_inputs` (same patches bit for bit, same grid), so training sees what the
rollout saw. verl's real `_compute_multi_modal_inputs`, processor and `extract_multi_modal_inputs` run here."""

import pickle

import pytest
import torch
from PIL import Image, ImageDraw
from tensordict import TensorDict
from transformers import AutoProcessor, AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.utils import tensordict_utils as tu
from verl.utils.model import extract_multi_modal_inputs

from verl_cua.integrations.verl.agent_loop_worker import CuaAgentLoopWorker
from verl_cua.integrations.verl.screenshots.compact import KEY, expand, insert_png, is_compact
from verl_cua.integrations.verl.screenshots.engine import CompactImagesMixin
from verl_cua.integrations.verl.sdpo.context import insert_image


def _screens(n, size=(224, 168)):
    out = []
    for i in range(n):
        image = Image.new("RGB", size, (20 * i, 90, 200 - 30 * i))
        draw = ImageDraw.Draw(image)
        draw.rectangle((10 + 7 * i, 12, 90, 60), fill=(250, 250, 250), outline=(0, 0, 0))
        draw.text((14 + 7 * i, 20), f"Button {i}", fill=(0, 0, 0))
        out.append(image)
    return out


def _worker(path, storage):
    worker = object.__new__(CuaAgentLoopWorker)  # the methods under test need no Ray actor
    worker.processor = AutoProcessor.from_pretrained(path)
    worker.tokenizer = AutoTokenizer.from_pretrained(path)
    worker.config = {"cua": {"env": {"image_storage": storage}}}
    worker.mm_processor_kwargs = None
    return worker


def _row(worker, images):
    messages = [{"role": "user", "content": [*({"type": "image"} for _ in images), {"type": "text", "text": "go"}]}]
    text = worker.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = worker.processor(text=[text], images=images, return_tensors="pt")["input_ids"][0]
    output = AgentLoopOutput(
        prompt_ids=ids.tolist(), response_ids=[1, 2], response_mask=[1, 1], multi_modal_data={"images": images},
        num_turns=2, metrics={},
    )  # fmt: skip
    return output, torch.cat([ids, torch.tensor([1, 2])])


@pytest.fixture
def rows(tiny_model):
    _family, path = tiny_model
    verl_worker, ours = _worker(path, "pixel_values"), _worker(path, "png")
    output, input_ids = _row(ours, _screens(3))
    return verl_worker, ours, output, input_ids


def test_rows_store_pngs_and_expand_to_verls_own_patches_bit_for_bit(rows):
    verl_worker, ours, output, input_ids = rows
    reference = verl_worker._compute_multi_modal_inputs(output, input_ids)
    assert "pixel_values" in reference and not is_compact(reference)  # storage=pixel_values: verl's own
    stored = ours._compute_multi_modal_inputs(output, input_ids)
    assert is_compact(stored) and "pixel_values" not in stored and len(stored[KEY]) == 3
    assert torch.equal(stored["image_grid_thw"], reference["image_grid_thw"])
    assert len(pickle.dumps(stored)) * 5 < len(pickle.dumps(reference))  # what TransferQueue holds per row
    expanded = expand(stored, ours.processor.image_processor)
    assert torch.equal(expanded["pixel_values"], reference["pixel_values"])
    assert set(expanded) == set(reference)


def test_the_engine_expands_a_micro_batch_to_what_verls_forward_would_get(rows):
    verl_worker, ours, output, input_ids = rows
    reference = verl_worker._compute_multi_modal_inputs(output, input_ids)
    stored = ours._compute_multi_modal_inputs(output, input_ids)

    class Base:
        def prepare_model_inputs(self, micro_batch):
            return extract_multi_modal_inputs(micro_batch.get("multi_modal_inputs", [])), {}

    class Engine(CompactImagesMixin, Base):
        model_config = type("ModelConfig", (), {"processor": ours.processor})()

    batch = TensorDict({"input_ids": torch.zeros(2, 3)}, batch_size=[2])
    tu.assign_non_tensor_stack(batch, "multi_modal_inputs", [stored, reference])  # a compact row and a verl row
    got, _ = Engine().prepare_model_inputs(batch)
    want = extract_multi_modal_inputs([reference, reference])
    assert torch.equal(got["pixel_values"], want["pixel_values"])
    assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])


def test_a_grid_mismatch_between_rollout_and_training_is_one_clear_error(rows):
    _verl, ours, output, input_ids = rows
    stored = ours._compute_multi_modal_inputs(output, input_ids)
    stored["image_grid_thw"] = stored["image_grid_thw"] * 2
    with pytest.raises(ValueError, match="processor differs between rollout and training"):
        expand(stored, ours.processor.image_processor)


def test_sdpos_final_screenshot_inserts_the_same_image_either_way(rows):
    verl_worker, ours, output, input_ids = rows
    reference = verl_worker._compute_multi_modal_inputs(output, input_ids)
    stored = ours._compute_multi_modal_inputs(output, input_ids)
    final = _screens(5)[4]
    processed = ours.processor.image_processor(images=[final], return_tensors="pt")
    grid = processed["image_grid_thw"]
    want = insert_image(reference, 1, processed["pixel_values"], grid)
    got = expand(insert_png(stored, 1, final, grid), ours.processor.image_processor)
    assert torch.equal(got["pixel_values"], want["pixel_values"])
    assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])
    assert torch.equal(got["images_seqlens"], want["images_seqlens"])


@pytest.mark.parametrize("size", [(1312, 736), (1920, 1080), (160, 210), (97, 3000), (20, 20)])
def test_the_grid_of_an_image_without_its_patches_is_the_processors(tiny_model, size):
    from verl_cua.integrations.verl.screenshots.compact import image_grid

    image_processor = AutoProcessor.from_pretrained(tiny_model[1]).image_processor
    image = Image.new("RGB", size, (10, 20, 30))
    assert torch.equal(image_grid(image, image_processor), image_processor(images=[image])["image_grid_thw"])


def _count_verl_passes(monkeypatch, extra: dict | None = None) -> list[int]:
    """Counts calls of verl's own multi-modal step (decode the row, run the whole processor), optionally adding
    `extra` keys to what it returns (a processor that gives more than grids and token types)."""
    owner = next(c for c in CuaAgentLoopWorker.__mro__[1:] if "_compute_multi_modal_inputs" in vars(c))  # verl's
    calls = []
    upstream = owner._compute_multi_modal_inputs

    def counted(self, output, input_ids):
        calls.append(1)
        return {**upstream(self, output, input_ids), **(extra or {})}

    monkeypatch.setattr(owner, "_compute_multi_modal_inputs", counted)
    return calls


def test_after_a_worker_checks_its_first_row_png_rows_skip_verls_processor_pass(rows, monkeypatch):
    verl_worker, ours, output, input_ids = rows
    reference = verl_worker._compute_multi_modal_inputs(output, input_ids)
    calls = _count_verl_passes(monkeypatch)
    first = ours._compute_multi_modal_inputs(output, input_ids)  # built both ways, compared
    later = [ours._compute_multi_modal_inputs(output, input_ids) for _ in range(3)]
    assert len(calls) == 1 and ours._fast_rows is True
    for row in (first, *later):
        assert set(row) == set(reference) - {"pixel_values"} | {KEY}
        assert torch.equal(row["image_grid_thw"], reference["image_grid_thw"])
        assert torch.equal(row["images_seqlens"], reference["images_seqlens"])
        assert row[KEY] == first[KEY]
        assert torch.equal(expand(row, ours.processor.image_processor)["pixel_values"], reference["pixel_values"])


def test_a_processor_that_gives_more_than_grids_keeps_verls_pass_for_every_row(rows, monkeypatch):
    _verl, ours, output, input_ids = rows
    calls = _count_verl_passes(monkeypatch, extra={"second_per_grid_ts": torch.tensor([1.0])})
    rows_out = [ours._compute_multi_modal_inputs(output, input_ids) for _ in range(3)]
    assert len(calls) == 3 and ours._fast_rows is False
    assert all("second_per_grid_ts" in row and is_compact(row) for row in rows_out)
