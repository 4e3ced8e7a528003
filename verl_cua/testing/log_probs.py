"""Teacher-forced log-probs of a response's tokens under a Hugging Face Qwen-VL, for checks and probes."""

from __future__ import annotations


def model_inputs(model, input_ids, mm: dict, image_pad: int) -> dict:
    """A Qwen-VL forward's inputs for the 1-D `input_ids` (a batch of one) with the images in `mm`, on the model's
    device; `mm_token_type_ids` so the model computes its M-RoPE positions."""
    import torch

    ids = input_ids[None].to(model.device)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "mm_token_type_ids": (ids == image_pad).int()}
    kwargs.update({k: mm[k].to(model.device) for k in ("pixel_values", "image_grid_thw") if k in mm})
    return kwargs


def response_log_probs(model, input_ids, mm: dict, n_response: int, image_pad: int):
    """Log-probs (on the CPU) of the last `n_response` tokens of the 1-D `input_ids`, each given what precedes it;
    `mm` holds the images' `pixel_values` and `image_grid_thw`. `mm_token_type_ids` is passed so the model computes
    its M-RoPE positions (Qwen2.5-VL falls back to 1-D text positions without it)."""
    import torch

    kwargs = model_inputs(model, input_ids, mm, image_pad)
    ids = kwargs["input_ids"]
    with torch.no_grad():
        logits = model(**kwargs).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[-n_response:, 0].cpu()


def student_prompt(processor, obs, shown=None, action_format: str = "pyautogui"):
    """The policy's first prompt for an observation as the trainer builds it (`first_turn`: the system prompt for
    the observation's type, the screenshot, the task and the element table or marks): (1-D input_ids, images'
    inputs; none for a11y_tree). `shown`: another observation whose screenshot and table replace `obs`'s (the
    observation swap)."""
    from verl_cua.actions.conversation import first_turn
    from verl_cua.actions.prompts import build_prompt, turn_context
    from verl_cua.envs.observation import observation_type

    shown = obs if shown is None else shown
    spec = build_prompt(action_format, screen=obs.screen, observation=observation_type(shown.extra))
    messages = first_turn(spec, obs.instruction, shown.screenshot, turn_context(action_format, shown.extra))
    inputs = chat_inputs(processor, messages, spec.shown([shown.screenshot]))  # a11y_tree: the table, no image
    return inputs["input_ids"][0], {k: inputs[k] for k in ("pixel_values", "image_grid_thw") if k in inputs}


def chat_inputs(processor, messages: list[dict], images: list) -> dict:
    """The trainer's chat `messages` (image parts hold their images) through the processor's chat template, with
    `images` in order: what `processor(text=[prompt], images=images)` returns."""
    parts = [
        {**m, "content": [{"type": "image"} if p["type"] == "image" else p for p in m["content"]]}
        if isinstance(m["content"], list)
        else m
        for m in messages
    ]
    prompt = processor.apply_chat_template(parts, tokenize=False, add_generation_prompt=True)
    return dict(processor(text=[prompt], images=images or None, return_tensors="pt"))
