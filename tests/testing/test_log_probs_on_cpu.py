"""`student_prompt`, the benches' copy of the trainer's first prompt: a text-only observation (`a11y_tree`) holds the
table and no image, and the tiny model scores it; the control, `screenshot_a11y_tree`, holds both."""

from types import SimpleNamespace

import pytest
from PIL import Image

from verl_cua.envs.observation import Element, with_elements

SCREEN = (160, 210)


@pytest.fixture(scope="module")
def tiny():
    import torch
    from transformers import AutoModelForImageTextToText
    from verl.utils import hf_processor

    from verl_cua.testing.tiny_models import build_tiny_model

    path = build_tiny_model("qwen25vl")
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    return model, hf_processor(str(path))


@pytest.mark.parametrize("observation", ["a11y_tree", "screenshot_a11y_tree"])
def test_a_text_only_prompt_holds_the_table_and_no_image(tiny, observation):
    from verl_cua.testing.log_probs import response_log_probs, student_prompt

    model, processor = tiny
    page = [Element("button", (40, 100, 20, 10), text="ONE"), Element("button", (90, 30, 30, 30), text="TWO")]
    shown, extra = with_elements(observation, Image.new("RGB", SCREEN, (255, 255, 255)), page, "dom")
    obs = SimpleNamespace(screen=SCREEN, instruction="Click ONE.", screenshot=shown, extra=extra)
    ids, mm = student_prompt(processor, obs)
    text = processor.tokenizer.decode(ids)
    assert "button\tONE\t\t\t(40, 100)\t(20, 10)" in text and "Click ONE." in text
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    if observation == "a11y_tree":
        assert mm == {} and "<|image_pad|>" not in text and "You get no screenshot" in text
    else:
        assert set(mm) == {"pixel_values", "image_grid_thw"} and "<|image_pad|>" in text
    log_probs = response_log_probs(model, ids, mm, 3, pad)
    assert log_probs.shape == (3,) and bool((log_probs <= 0).all())
