"""The warm start's data path: each instruction's prompt is tokenized once and each page only turned into patches,
which must give exactly what the processor gives for the whole prompt; progress lines at every tenth."""

import random

import pytest
import torch
from transformers import AutoProcessor

from verl_cua.actions.prompts import build_prompt
from verl_cua.testing.tiny_models import build_tiny_model
from verl_cua.testing.warm_start import Progress, Prompts, _page

SCREEN = (160, 210)


@pytest.mark.parametrize("family", ["qwen25vl", "qwen3vl"])
def test_cached_prompts_equal_the_processors_whole_output(family):
    processor = AutoProcessor.from_pretrained(build_tiny_model(family))
    spec = build_prompt("pyautogui", screen=SCREEN)
    prompts, rng = Prompts(processor, spec), random.Random(0)
    for instruction in ["Click the button.", "Focus into the textbox.", "Click the button."] * 2:
        page = _page(SCREEN, rng)
        content = [{"type": "image"}, {"type": "text", "text": spec.user_text(instruction)}]
        messages = [{"role": "system", "content": spec.system}, {"role": "user", "content": content}]
        text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        want = processor(text=[text], images=[page], return_tensors="pt")
        got = prompts.inputs(instruction, page)
        assert set(got) == set(want)
        for key, value in want.items():
            assert torch.equal(got[key], value), key
    assert len(prompts._text) == 2  # each instruction's text processed once


def test_a_page_of_another_size_is_refused():
    processor = AutoProcessor.from_pretrained(build_tiny_model("qwen25vl"))
    prompts, rng = Prompts(processor, build_prompt("pyautogui", screen=SCREEN)), random.Random(0)
    prompts.inputs("Click the button.", _page(SCREEN, rng))
    with pytest.raises(ValueError, match="another image grid"):
        prompts.inputs("Click the button.", _page((320, 420), rng))


def test_progress_prints_a_line_at_every_tenth(capsys):
    progress = Progress(95, "warm start of m")
    for step in range(1, 96):
        progress.update(step)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "warm start of m: 95 steps on the CPU (built once, then cached)"
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines[1:]]
    assert done[0] == 1 and done[-1] == 95 and 10 <= len(done) <= 12
    assert all("s left" in line for line in lines[1:])


def test_progress_also_prints_when_a_tenth_takes_longer_than_its_interval(capsys):
    """3000 steps at a few a second: a tenth is minutes; a line still comes every `every_s` seconds."""
    now = [0.0]
    progress = Progress(3000, "warm start of m", every_s=30.0)
    progress._clock, progress.start, progress._last = (lambda: now[0]), 0.0, 0.0
    for step in range(1, 301):  # the first tenth: 300 steps at 0.25 s each, 75 s
        now[0] = step * 0.25
        progress.update(step, f"loss {1 / step:.3f}")
    lines = capsys.readouterr().err.splitlines()[1:]
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    assert done == [1, 121, 241, 300]  # the first step, every 30 s (120 steps), the tenth
    assert lines[1] == "warm start of m: 121/3000 steps, 30 s, about 720 s left, loss 0.008"  # 30.25 s / 121 x 2879


def test_teacher_examples_are_the_trainers_teacher_context_and_answer_the_demo_or_the_point():
    """icl steps: the student's prompt with SDPO's feedback block as the trainer builds it; a block with a demo is
    answered with the demo's click, a block without one with the step's own random point."""
    from verl_cua.integrations.verl.sdpo.context import BLOCK_HEADER
    from verl_cua.testing.warm_start import TeacherExamples, click_text

    processor = AutoProcessor.from_pretrained(build_tiny_model("qwen25vl"))
    tokenizer = processor.tokenizer
    prompts, rng = Prompts(processor, build_prompt("pyautogui", screen=SCREEN)), random.Random(0)
    teacher = TeacherExamples(processor, SCREEN, (0, 50, *SCREEN), seed=0)
    kinds = {"copy": 0, "point": 0}
    for _ in range(30):
        student = prompts.inputs("Click the button.", _page(SCREEN, rng))
        point = (rng.randrange(160), rng.randrange(50, 210))
        inputs, answer = teacher.example(student, point)
        text = tokenizer.decode(inputs["input_ids"][0])
        assert BLOCK_HEADER in text and text.endswith("<|im_start|>assistant\n")
        assert inputs["input_ids"].shape[1] > student["input_ids"].shape[1]
        images = int(inputs["image_grid_thw"].shape[0])
        pads = int((inputs["input_ids"] == teacher.builder.image_pad).sum())
        assert pads == int(inputs["image_grid_thw"].prod(-1).sum()) // 4 and images in (1, 2)
        assert torch.equal(inputs["mm_token_type_ids"], (inputs["input_ids"] == teacher.builder.image_pad).long())
        demo = " ".join(click_text(*answer).split())
        if demo in text:
            kinds["copy"] += 1  # the demo's click is the answer
        else:
            kinds["point"] += 1
            assert answer == point and "A successful attempt did" not in text
    assert kinds["copy"] >= 10 and kinds["point"] >= 4  # COPY_SHARE 2/3 of 30


def test_a_right_padded_batch_scores_each_row_as_alone():
    """The icl warm start's batches: rows of different lengths (teacher contexts with one or two images, student
    prompts) right-padded into one forward give the token-weighted mean of each row's own loss."""
    from transformers import AutoModelForImageTextToText

    from verl_cua.testing.warm_start import TeacherExamples, _batch_nll, _nll, click_text

    path = build_tiny_model("qwen25vl")
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    tokenizer, end = processor.tokenizer, processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompts, rng = Prompts(processor, build_prompt("pyautogui", screen=SCREEN)), random.Random(1)
    teacher = TeacherExamples(processor, SCREEN, (0, 50, *SCREEN), seed=1)
    rows = []
    for i in range(4):
        inputs = prompts.inputs("Click the button.", _page(SCREEN, rng))
        point = (rng.randrange(5, 160), rng.randrange(50, 210))
        if i % 2:
            inputs, point = teacher.example(inputs, point)
        rows.append((inputs, click_text(*point)))
    assert len({r[0]["input_ids"].shape[1] for r in rows}) > 1  # the padding is exercised
    with torch.no_grad():
        batch = _batch_nll(model, tokenizer, rows, end)
        sums = [_nll(model, tokenizer, inputs, turn, end, total=True) for inputs, turn in rows]
    tokens = sum(len(tokenizer.encode(turn, add_special_tokens=False)) + 1 for _, turn in rows)
    assert batch.item() == pytest.approx(sum(s.item() for s in sums) / tokens, rel=1e-4)
