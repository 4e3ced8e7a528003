"""Teacher-forced log-probs of a response's tokens under a Hugging Face Qwen-VL, for checks and probes."""

from __future__ import annotations


def model_inputs(model, input_ids, mm: dict, image_pad: int) -> dict:
    """A Qwen-VL forward's inputs for the 1-D `input_ids` (a batch of one) with the images in `mm`, on the model's
    device; `mm_token_type_ids` so the model computes its M-RoPE positions."""
    import torch

    ids = input_ids[None].to(model.device)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "mm_token_type_ids": (ids == image_pad).int()}
    kwargs.update({k: mm[k].to(model.device) for k in ("pixel_values", "image_grid_thw")})
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


def student_prompt(processor, obs, screenshot=None, action_format: str = "pyautogui"):
    """The policy's prompt for a MiniWoB++ observation as the trainer builds it: (1-D input_ids, images' inputs);
    `screenshot` replaces the observation's own (the screenshot-swap check)."""
    from verl_cua.actions.prompts import build_prompt

    spec = build_prompt(action_format, screen=obs.screen)
    content = [{"type": "image"}, {"type": "text", "text": spec.user_text(obs.instruction)}]
    messages = [{"role": "system", "content": spec.system}, {"role": "user", "content": content}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    image = obs.screenshot if screenshot is None else screenshot
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    return inputs["input_ids"][0], {k: inputs[k] for k in ("pixel_values", "image_grid_thw")}
