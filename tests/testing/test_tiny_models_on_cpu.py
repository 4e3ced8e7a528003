"""Tiny random Qwen2.5-VL / Qwen3-VL dirs: load with stock transformers and verl, tokenize, template, expand images,
generate with M-RoPE on CPU, stay small, and come from a deterministic, concurrency-safe cache."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from PIL import Image  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
    Qwen2Tokenizer,
)

from verl_cua.testing import tiny_models  # noqa: E402
from verl_cua.testing.tiny_models import FAMILIES, build_tiny_model, cache_root  # noqa: E402

MODEL_TYPES = {"qwen25vl": "qwen2_5_vl", "qwen3vl": "qwen3_vl"}
MIXED = (
    "<|im_start|>user\nClick OK at (12, 34), then type 'naïve café' — 3.14!<|im_end|>\n"
    "<|im_start|>assistant\n```python\npyautogui.click(12, 34)\n```\n"
    '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [512, 384]}}\n'
    "</tool_call><|im_end|>\n<|vision_start|><|image_pad|><|vision_end|>\tdone\n\n"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "computer_use",
            "description": "Use the mouse.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        },
    }
]


@pytest.fixture(scope="module", params=FAMILIES)
def model(request) -> tuple[str, Path]:
    """(family, path) of the cached tiny model."""
    return request.param, build_tiny_model(request.param)


def _screenshot(size: tuple[int, int] = (160, 210)) -> Image.Image:
    g = torch.Generator().manual_seed(0)
    pixels = torch.randint(0, 256, (size[1], size[0], 3), generator=g, dtype=torch.uint8)
    return Image.fromarray(pixels.numpy())


def _prompt(processor, text: str = "Click the OK button.") -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    return processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- API, CLI, cache -----------------------------------------------------------------------------------------


def test_unknown_family_raises_listing_valid_ones():
    with pytest.raises(ValueError, match="qwen25vl.*qwen3vl"):
        build_tiny_model("qwen2vl")


def test_cli_prints_the_path_and_rejects_unknown_families_in_one_line(capsys):
    assert tiny_models.main(["--family", "qwen25vl"]) == 0
    assert capsys.readouterr().out.strip() == str(build_tiny_model("qwen25vl"))
    assert tiny_models.main(["--family", "llama"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'llama'" in err and all(f in err for f in FAMILIES)


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("VERL_CUA_CACHE", str(tmp_path))
    assert cache_root() == tmp_path / "tiny-models"
    monkeypatch.delenv("VERL_CUA_CACHE")
    assert cache_root() == Path.home() / ".cache" / "verl-cua" / "tiny-models"


def test_second_build_is_a_fast_cache_hit(model):
    family, path = model
    weights = path / "model.safetensors"
    before = weights.stat().st_mtime_ns
    start = time.perf_counter()
    again = build_tiny_model(family)
    assert again == path and time.perf_counter() - start < 0.5
    assert weights.stat().st_mtime_ns == before
    assert path.parent == cache_root() and path.name.startswith(f"{family}-")


def test_concurrent_builds_share_one_deterministic_directory(monkeypatch, tmp_path):
    shared = build_tiny_model("qwen25vl")
    monkeypatch.setenv("VERL_CUA_CACHE", str(tmp_path))
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(build_tiny_model("qwen25vl"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and len(set(results)) == 1
    built = results[0]
    assert built.parent == tmp_path / "tiny-models" and built.name == shared.name
    assert [p.name for p in built.parent.iterdir() if p.is_dir()] == [built.name]  # no temp dirs left behind
    for name in ("model.safetensors", "tokenizer.json", "config.json", "processor_config.json"):
        assert _digest(built / name) == _digest(shared / name), name


def test_out_dir_and_seed(tmp_path):
    out = build_tiny_model("qwen3vl", tmp_path / "seed1", seed=1)
    shared = build_tiny_model("qwen3vl")
    assert out == tmp_path / "seed1" and (out / "config.json").is_file()
    assert _digest(out / "model.safetensors") != _digest(shared / "model.safetensors")
    assert _digest(out / "tokenizer.json") == _digest(shared / "tokenizer.json")  # token ids do not depend on seed
    assert build_tiny_model("qwen3vl", out, seed=1) == out
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        build_tiny_model("qwen3vl", foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


# ---- the directory -------------------------------------------------------------------------------------------


def test_config_is_small_float32_and_covers_every_token_id(model):
    from safetensors import safe_open

    family, path = model
    config = AutoConfig.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert config.model_type == MODEL_TYPES[family]
    assert 2000 <= len(tokenizer) <= config.text_config.vocab_size <= 4096
    assert max(tokenizer.get_vocab().values()) < config.text_config.vocab_size
    assert config.image_token_id == tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert config.vision_config.out_hidden_size == config.text_config.hidden_size
    assert config.tie_word_embeddings
    assert sum(f.stat().st_size for f in path.iterdir()) < 10 * 2**20
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}


def test_tokenizer_round_trips_mixed_text_with_special_tokens(model):
    _, path = model
    tokenizer = AutoTokenizer.from_pretrained(path)
    ids = tokenizer.encode(MIXED, add_special_tokens=False)
    assert tokenizer.decode(ids) == MIXED
    assert len(ids) < len(MIXED) // 2  # real BPE merges, not bytes
    for token in tiny_models.SPECIAL_TOKENS + tiny_models.ADDED_TOKENS:
        assert tokenizer.encode(token, add_special_tokens=False) == [tokenizer.convert_tokens_to_ids(token)]
    assert len(tokenizer.encode("\n", add_special_tokens=False)) == 1  # verl's Qwen continuous-token builder
    assert len(tokenizer.encode("2024", add_special_tokens=False)) == 4  # digits split one by one, as in Qwen
    kept = tokenizer.decode(ids, skip_special_tokens=True)
    assert "<tool_call>" in kept and "<|im_end|>" not in kept and "<|image_pad|>" not in kept
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token) == ("<|im_end|>", "<|endoftext|>", None)
    # transformers' own Qwen2 tokenizer rebuilds the pipeline from vocab + merges: it must agree id for id.
    assert Qwen2Tokenizer.from_pretrained(path).encode(MIXED, add_special_tokens=False) == ids


def test_verl_tokenizer_and_processor_helpers_load_it(model):
    pytest.importorskip("verl")
    from verl.utils import hf_processor, hf_tokenizer

    family, path = model
    tokenizer, processor = hf_tokenizer(str(path)), hf_processor(str(path))
    assert tokenizer.decode(tokenizer.encode(MIXED, add_special_tokens=False)) == MIXED
    assert type(processor).__name__ == {"qwen25vl": "Qwen2_5_VLProcessor", "qwen3vl": "Qwen3VLProcessor"}[family]
    assert hasattr(processor, "get_rope_index")


def test_chat_template_renders_images_tools_and_tool_turns(model):
    family, path = model
    tokenizer, processor = AutoTokenizer.from_pretrained(path), AutoProcessor.from_pretrained(path)
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click OK."}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "computer_use", "arguments": {"x": 3}}}],
        },
        {"role": "tool", "content": "clicked"},
    ]
    text = processor.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert text == tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    default = "You are a helpful assistant.\n\n" if family == "qwen25vl" else ""
    assert text.startswith(f"<|im_start|>system\n{default}# Tools\n")
    tools_json = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    assert json.loads(tools_json) == TOOLS[0]
    assert "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Click OK.<|im_end|>\n" in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "computer_use", "arguments": {"x": 3}}\n</tool_call>' in text
    assert text.endswith(
        "<|im_end|>\n<|im_start|>user\n<tool_response>\nclicked\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    plain = processor.apply_chat_template([{"role": "system", "content": "Be brief."}, *messages[:1]], tokenize=False)
    assert plain.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
    assert plain.endswith("<|im_end|>\n") and "# Tools" not in plain
    two = [{"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "Diff?"}]}]
    numbered = processor.apply_chat_template(two, tokenize=False, add_vision_id=True)
    assert "Picture 1: <|vision_start|><|image_pad|><|vision_end|>Picture 2: <|vision_start|>" in numbered


@pytest.mark.parametrize("size", [(160, 210), (320, 420)])
def test_processor_expands_the_image_pad_to_the_grid(model, size):
    _, path = model
    processor = AutoProcessor.from_pretrained(path)
    inputs = processor(text=[_prompt(processor)], images=[_screenshot(size)], return_tensors="pt")
    grid = inputs["image_grid_thw"]
    merge = processor.image_processor.merge_size
    n_pad = int((inputs["input_ids"] == processor.image_token_id).sum())
    assert n_pad == int(grid.prod()) // merge**2
    assert 20 <= n_pad <= 80  # a few dozen tokens for a small screenshot
    assert inputs["pixel_values"].shape[0] == int(grid.prod())
    assert torch.equal(inputs["mm_token_type_ids"][0] == 1, inputs["input_ids"][0] == processor.image_token_id)


def test_generate_with_an_image_uses_mrope(model):
    _, path = model
    processor = AutoProcessor.from_pretrained(path)
    net = AutoModelForImageTextToText.from_pretrained(path).eval()
    assert net.dtype == torch.float32
    inputs = processor(text=[_prompt(processor)], images=[_screenshot()], return_tensors="pt")
    out = net.generate(**inputs, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert out.shape[1] == inputs["input_ids"].shape[1] + 6
    assert torch.equal(out[0, : inputs["input_ids"].shape[1]], inputs["input_ids"][0])
    # image tokens share positions, so M-RoPE ends below the sequence length: a negative delta
    assert int(net.model.rope_deltas) < 0


def test_get_rope_index_places_the_image_on_a_grid(model):
    pytest.importorskip("verl")
    from verl.utils import hf_processor

    _, path = model
    processor = hf_processor(str(path))
    net = AutoModelForImageTextToText.from_pretrained(path).eval()
    inputs = processor(text=[_prompt(processor)], images=[_screenshot()], return_tensors="pt")
    keys = ("input_ids", "attention_mask", "image_grid_thw", "mm_token_type_ids")
    kwargs = {k: inputs[k] for k in keys}
    positions, deltas = net.model.get_rope_index(**kwargs)
    bound, bound_deltas = processor.get_rope_index(**kwargs)  # what verl's agent loop calls
    assert torch.equal(positions, bound) and torch.equal(deltas, bound_deltas)
    image = inputs["input_ids"][0] == processor.image_token_id
    _, h, w = (int(v) for v in inputs["image_grid_thw"][0])
    merge = processor.image_processor.merge_size
    t_pos, h_pos, w_pos = (positions[i, 0, image] for i in range(3))
    assert len(set(t_pos.tolist())) == 1
    assert h_pos.max() - h_pos.min() == h // merge - 1 and w_pos.max() - w_pos.min() == w // merge - 1
    first = int(image.nonzero()[0])
    after = first + int(image.sum())
    assert int(positions[0, 0, after]) == max(int(h_pos.max()), int(w_pos.max())) + 1


def test_qwen3vl_forward_needs_mm_token_type_ids(model):
    family, path = model
    if family != "qwen3vl":
        pytest.skip("Qwen2.5-VL silently falls back to 1-D positions instead")
    processor = AutoProcessor.from_pretrained(path)
    net = AutoModelForImageTextToText.from_pretrained(path).eval()
    inputs = processor(text=[_prompt(processor)], images=[_screenshot()], return_tensors="pt")
    inputs.pop("mm_token_type_ids")
    with pytest.raises(ValueError, match="mm_token_type_ids"):
        net(**inputs)


# ---- verl -----------------------------------------------------------------------------------------------------


def test_verl_model_config_and_continuous_token_builder(model):
    pytest.importorskip("verl")
    from verl.utils.tokenizer.continuous_token_wiring import (
        get_continuous_token_builder_class,
        infer_continuous_token_model_family,
    )
    from verl.workers.config import HFModelConfig

    family, path = model
    config = HFModelConfig(path=str(path))
    assert config.hf_config.model_type == MODEL_TYPES[family]
    assert config.tokenizer is not None and config.processor is not None
    assert config.processor.chat_template == config.tokenizer.chat_template
    ct_family = infer_continuous_token_model_family(
        hf_model_type=config.hf_config.model_type, has_multimodal_processor=True
    )
    assert ct_family.value == family
    builder = get_continuous_token_builder_class(ct_family)(config.tokenizer, config.processor)
    assert type(builder).__name__ == "QwenVLContinuousTokenBuilder"
    image = _screenshot()
    turn = {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Next."}]}
    history = [turn, {"role": "assistant", "content": "pyautogui.click(1, 2)"}]
    delta = builder.tokenize_context_incremental_messages(history, [*history, turn])
    full = builder.build_initial_tokens([*history, turn], images=[image, image])
    prefix = builder._render_tokens(history, add_generation_prompt=False)
    assert full[: len(prefix)] == prefix and delta == full[len(prefix) :]
    assert delta.count(config.processor.image_token_id) == full.count(config.processor.image_token_id) // 2 > 0


def test_head_dim_32_gives_vllms_cpu_attention_its_shape_and_leaves_the_default_models_keys(tmp_path):
    """vLLM's CPU attention has no head_dim 16: `head_dim=32` keeps the width with fewer, wider heads and M-RoPE
    sections that cover head_dim // 2 frequencies; the default recipe (and every cached model built on it) stays."""
    assert tiny_models.text_spec() is tiny_models._TEXT and tiny_models._recipe(
        "qwen3vl", 0, 16
    ) == tiny_models._recipe("qwen3vl", 0)
    assert tiny_models._recipe_key("qwen3vl", 0, 32) != tiny_models._recipe_key("qwen3vl", 0)
    for family in FAMILIES:
        path = build_tiny_model(family, tmp_path / family, head_dim=32)
        text = AutoConfig.from_pretrained(path).get_text_config()
        assert text.hidden_size // text.num_attention_heads == 32 and text.num_key_value_heads == 1
        sections = text.rope_parameters["mrope_section"]
        assert sum(sections) == 16 and sections == [2 * n for n in tiny_models._FAMILY[family]["rope"]["mrope_section"]]
        net = AutoModelForImageTextToText.from_pretrained(path)
        out = net(input_ids=torch.tensor([[1, 2, 3]]))
        assert torch.isfinite(out.logits).all()
    with pytest.raises(ValueError, match="unsupported head_dim 24; valid: 16, 32, 64"):
        tiny_models.text_spec(24)
