"""A micro-batch without any screenshot (infra rows: a dead browser or desktop) goes through verl's own Qwen-VL forward:
verl 0.9.1's Qwen2-VL path crashes on it under transformers 5 without our fix, returns the plain HF logits with it,
and the vision tower still takes part with a zero gradient; Qwen3-VL needs no fix; with an upstream fix ours steps
aside."""

import importlib
import subprocess
import sys
import textwrap
from types import ModuleType

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor
from verl.models.transformers import qwen2_vl as verl_qwen2_vl
from verl.models.transformers.monkey_patch import apply_monkey_patch

from verl_cua.integrations.verl.fixes import visual_output
from verl_cua.testing.tiny_models import build_tiny_model

# the HF classes whose methods verl's `apply_monkey_patch` replaces for Qwen2/2.5-VL and Qwen3-VL (restored after)
PATCHED_MODULES = tuple(
    f"transformers.models.{name}.modeling_{name}" for name in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
)
PATCHED_METHODS = ("forward", "fast_pos_embed_interpolate")
ROWS, LENGTH = 2, 9


def _verl_s_own(function):
    """verl's function itself, under our wrapper if the plug-in installed it in this process."""
    return getattr(function, "__wrapped__", function)


@pytest.fixture
def verl_forward(monkeypatch):
    """Patches a model the way verl's FSDP engine does with use_remove_padding=false; undone after the test."""
    for name in PATCHED_MODULES:
        module = importlib.import_module(name)
        for cls in [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == name]:
            for method in PATCHED_METHODS:
                if method in vars(cls):
                    monkeypatch.setattr(cls, method, vars(cls)[method])
    return lambda model: apply_monkey_patch(model, use_remove_padding=False)


@pytest.fixture
def verl_s_embeds(monkeypatch):
    """Sets verl's Qwen2-VL `_get_input_embeds`: verl's own (`None`) or a given one; restored after the test."""
    original = _verl_s_own(verl_qwen2_vl._get_input_embeds)

    def use(function=None):
        monkeypatch.setattr(verl_qwen2_vl, "_get_input_embeds", function or original)
        return original

    return use


def _model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForImageTextToText.from_pretrained(build_tiny_model(family), dtype=torch.float32)


def _text_only_batch() -> dict[str, torch.Tensor]:
    """Rows without any image token, left-padded as verl pads prompts, with verl's (4, B, L) position ids."""
    input_ids = torch.randint(20, 2000, (ROWS, LENGTH), generator=torch.Generator().manual_seed(1))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, :3] = 0
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": positions.expand(4, ROWS, LENGTH).clone(),
    }


def _verl_forward_without_images(family: str, patch) -> tuple[torch.Tensor, torch.Tensor, torch.nn.Module]:
    """verl's patched forward and the plain HF forward of the same text-only batch; the model, for its gradients."""
    model = _model(family)
    batch = _text_only_batch()
    with torch.no_grad():
        plain = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False).logits
    patch(model)
    logits = model(**batch, use_cache=False).logits
    return logits, plain, model


def _assert_same_logits_and_zero_tower_gradient(logits, plain, model) -> None:
    mask = _text_only_batch()["attention_mask"].bool()
    torch.testing.assert_close(logits[mask], plain[mask], rtol=0, atol=1e-5)
    logits[mask].float().logsumexp(-1).sum().backward()
    tower = list(model.model.visual.parameters())
    assert tower and all(p.grad is not None for p in tower), "the vision tower must take part in the forward (FSDP)"
    assert all(torch.count_nonzero(p.grad) == 0 for p in tower)
    assert any(torch.count_nonzero(p.grad) for p in model.model.language_model.parameters())


def test_verl_s_qwen25vl_forward_crashes_on_a_micro_batch_without_images(verl_forward, verl_s_embeds):
    """The negative control: verl 0.9.1's own function under transformers 5 (so the tests below can fail)."""
    verl_s_embeds()
    with pytest.raises(AttributeError, match="mean"):
        _verl_forward_without_images("qwen25vl", verl_forward)


def test_with_the_fix_qwen25vl_gives_plain_hf_logits_and_a_zero_tower_gradient(verl_forward, verl_s_embeds):
    verl_s_embeds(visual_output.with_visual_output_unpacked(verl_s_embeds()))
    _assert_same_logits_and_zero_tower_gradient(*_verl_forward_without_images("qwen25vl", verl_forward))


def test_qwen3vl_already_unpacks_the_tower_output(verl_forward):
    _assert_same_logits_and_zero_tower_gradient(*_verl_forward_without_images("qwen3vl", verl_forward))


def test_a_batch_with_an_image_goes_through_verl_s_function_untouched(verl_forward, verl_s_embeds, monkeypatch):
    unpack, seen = verl_qwen2_vl.unpack_visual_output, []
    monkeypatch.setattr(verl_qwen2_vl, "unpack_visual_output", lambda out: seen.append(type(out)) or unpack(out))
    verl_s_embeds()
    model = _model("qwen25vl")
    verl_forward(model)
    processor = AutoProcessor.from_pretrained(build_tiny_model("qwen25vl"))
    merge, vision = processor.image_processor.merge_size, model.config.vision_config
    grid = torch.tensor([[1, 2 * merge, 2 * merge]])
    tokens = processor.tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|image_pad|>", "<|vision_end|>"])
    input_ids = torch.tensor([[30, 31, tokens[0]] + [tokens[1]] * 4 + [tokens[2], 32, 33]])
    mrope = verl_qwen2_vl.get_rope_index(processor, input_ids[0], image_grid_thw=grid)
    batch = {
        "input_ids": input_ids,
        "position_ids": torch.cat([torch.arange(input_ids.shape[1])[None], mrope]).unsqueeze(1),
        "pixel_values": torch.randn(
            int(grid.prod()), vision.in_channels * vision.temporal_patch_size * vision.patch_size**2
        ),
        "image_grid_thw": grid,
    }
    with torch.no_grad():
        own = model(**batch, use_cache=False).logits
        verl_s_embeds(visual_output.with_visual_output_unpacked(verl_s_embeds()))
        wrapped = model(**batch, use_cache=False).logits
    assert torch.equal(wrapped, own)
    assert len(seen) == 2 and torch.Tensor not in seen  # verl's image branch unpacked the tower's own output


def _fixed_upstream(model, input_ids, attention_mask=None, pixel_values=None, pixel_values_videos=None, *_args):
    """A stand-in for verl's function once fixed upstream by reading `.pooler_output` (as its Qwen3.5 path does)."""
    embeds = model.get_input_embeddings()(input_ids)
    vision = model.config.vision_config
    dummy = torch.zeros((16, vision.in_channels * vision.temporal_patch_size * vision.patch_size**2))
    tower = model.visual(dummy.to(embeds), grid_thw=torch.tensor([[1, 4, 4]]))
    return embeds + 0.0 * tower.pooler_output.mean(), attention_mask


def test_the_probe_tells_verl_s_crash_from_an_upstream_fix(verl_s_embeds):
    assert visual_output.crashes_without_images(verl_s_embeds())
    assert not visual_output.crashes_without_images(_fixed_upstream)
    assert not visual_output.crashes_without_images(visual_output.with_visual_output_unpacked(verl_s_embeds()))


def test_with_an_upstream_fix_the_install_leaves_verl_s_function_and_it_works(verl_forward, verl_s_embeds):
    verl_s_embeds(_fixed_upstream)
    visual_output.install(verl_qwen2_vl)
    assert verl_qwen2_vl._get_input_embeds is _fixed_upstream
    _assert_same_logits_and_zero_tower_gradient(*_verl_forward_without_images("qwen25vl", verl_forward))


def test_the_install_wraps_verl_s_function_once():
    module = ModuleType("stand_in")
    module._get_input_embeds = _verl_s_own(verl_qwen2_vl._get_input_embeds)
    visual_output.install(module)
    wrapped = module._get_input_embeds
    visual_output.install(module)
    assert module._get_input_embeds is wrapped and wrapped.__wrapped__ is _verl_s_own(verl_qwen2_vl._get_input_embeds)


def test_the_plugin_installs_the_fix_where_verl_s_workers_look_it_up():
    script = """
        import verl
        from verl.models.transformers import qwen2_vl, qwen3_vl
        print(getattr(qwen2_vl._get_input_embeds, "verl_cua_unpacks_visual_output", False),
              hasattr(qwen3_vl._get_input_embeds, "verl_cua_unpacks_visual_output"))
        """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "True False"
