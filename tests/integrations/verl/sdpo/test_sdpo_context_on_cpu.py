"""SDPO's teacher context on the real tiny Qwen2.5-VL / Qwen3-VL tokenizer and processor: the feedback block sits at
the end of the first user turn with the final screenshot as one more image; the response tokens are unchanged; the
M-RoPE position ids equal what verl's agent loop computes for the same sequence."""

import io
from types import SimpleNamespace

import torch
from PIL import Image
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.utils import hf_processor, hf_tokenizer

from verl_cua.integrations.verl.sdpo.context import BLOCK_HEADER, TeacherContextBuilder, feedback_block


def _student(processor, tokenizer):
    screen = Image.new("RGB", (112, 84), (200, 30, 30))
    messages = [
        {"role": "system", "content": "You are a GUI agent."},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the button."}]},
    ]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[screen], return_tensors="pt")
    prompt = inputs["input_ids"][0]
    mm = {"pixel_values": inputs["pixel_values"], "image_grid_thw": inputs["image_grid_thw"]}
    response = torch.tensor(tokenizer.encode("pyautogui.click(3, 4)<|im_end|>", add_special_tokens=False))
    return prompt, response, mm


def _png(color):
    buf = io.BytesIO()
    Image.new("RGB", (56, 56), color).save(buf, format="PNG")
    return buf.getvalue()


def test_teacher_context_has_the_block_the_image_and_verls_position_ids(tiny_model):
    _, path = tiny_model
    tokenizer, processor = hf_tokenizer(path), hf_processor(path)
    prompt, response, mm = _student(processor, tokenizer)
    builder = TeacherContextBuilder(tokenizer, processor)
    block = feedback_block(["pyautogui.click(10, 20)"], 0.0, "1 outputs were not valid actions", _png((0, 0, 255)))
    out = builder.build(prompt, response, mm, block)

    text = tokenizer.decode(out["prompts"])
    head, _, turn_end = text.rpartition("<|im_end|>")
    assert BLOCK_HEADER in head and "Step 1: pyautogui.click(10, 20)" in head
    assert "The evaluator said: 1 outputs were not valid actions" in head
    assert head.count("<|vision_start|>") == 2 and head.rindex("<|vision_start|>") > head.index(BLOCK_HEADER)
    assert "assistant" in turn_end  # the block is inside the user turn, before the assistant header
    assert torch.equal(out["input_ids"][-len(response) :], response)  # the same response tokens
    assert torch.equal(out["prompts"][: builder.insert_at(prompt)], prompt[: builder.insert_at(prompt)])

    grid = out["multi_modal_inputs"]["image_grid_thw"]
    assert grid.shape[0] == 2 and torch.equal(grid[0], mm["image_grid_thw"][0])
    pads = int((out["input_ids"] == builder.image_pad).sum())
    assert pads == int((grid.prod(-1) // builder.merge**2).sum())
    n_student = mm["pixel_values"].shape[0]
    assert torch.equal(out["multi_modal_inputs"]["pixel_values"][:n_student], mm["pixel_values"])
    assert out["multi_modal_inputs"]["pixel_values"].shape[0] == int(grid.prod(-1).sum())

    ids = out["input_ids"].unsqueeze(0)
    verl_mm = {**out["multi_modal_inputs"], "mm_token_type_ids": torch.zeros_like(ids)}
    reference = AgentLoopWorker._compute_position_ids(
        SimpleNamespace(processor=processor), ids, torch.ones_like(ids), verl_mm
    ).squeeze(0)
    assert torch.equal(out["position_ids"], reference)


def test_no_image_and_no_demo_leaves_a_text_only_block(tiny_model):
    _, path = tiny_model
    tokenizer, processor = hf_tokenizer(path), hf_processor(path)
    prompt, response, mm = _student(processor, tokenizer)
    out = TeacherContextBuilder(tokenizer, processor).build(
        prompt, response, mm, feedback_block(None, 0.25, "ran out of its token budget", None, max_chars=2000)
    )
    text = tokenizer.decode(out["prompts"])
    assert "Your attempt scored 0.25." in text and "successful attempt" not in text
    assert text.count("<|vision_start|>") == 1
    assert torch.equal(out["multi_modal_inputs"]["pixel_values"], mm["pixel_values"])


def test_an_empty_block_scores_the_response_exactly_as_the_student(tiny_model):
    """The teacher's log-probs are read at the student's response positions: with nothing inserted they are the
    student's, to the bit; with a block they differ (a shift of the response by one token would fail both)."""
    from transformers import AutoModelForImageTextToText

    from verl_cua.integrations.verl.sdpo.context import FeedbackBlock
    from verl_cua.testing.log_probs import response_log_probs

    _, path = tiny_model
    tokenizer, processor = hf_tokenizer(path), hf_processor(path)
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    prompt, response, mm = _student(processor, tokenizer)
    builder = TeacherContextBuilder(tokenizer, processor)
    student = response_log_probs(model, torch.cat([prompt, response]), mm, len(response), builder.image_pad)

    empty = builder.build(prompt, response, mm, FeedbackBlock("", ""))
    assert torch.equal(empty["input_ids"], torch.cat([prompt, response]))
    teacher = response_log_probs(
        model, empty["input_ids"], empty["multi_modal_inputs"], len(response), builder.image_pad
    )
    assert torch.equal(teacher, student)

    block = builder.build(prompt, response, mm, feedback_block(["pyautogui.click(3, 4)"], 0.0, "", None))
    teacher = response_log_probs(
        model, block["input_ids"], block["multi_modal_inputs"], len(response), builder.image_pad
    )
    assert teacher.shape == student.shape and not torch.allclose(teacher, student, atol=1e-4)
