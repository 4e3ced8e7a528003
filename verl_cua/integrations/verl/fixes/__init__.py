"""Workarounds for verl 0.9.1 (and the transformers it runs with), each installed by the plug-in and each to go when
upstream fixes it:

- `attention`: verl loads `flash_attention_2` by default (verl `models/transformers/qwen2_vl.py`,
  `attention_utils.py`) and fails without a usable flash-attn 2; we fall back to sdpa.
- `position_ids`: verl's `maybe_fix_3d_position_ids` (`utils/tensordict_utils.py`; verl issue #7899, PR #7901)
  mis-reads same-length Qwen-VL rows' M-RoPE ids, which TransferQueue packs channel-ragged.
- `visual_output`: verl's `_get_input_embeds` (`models/transformers/qwen2_vl.py`) crashes on a Qwen2(.5)-VL
  micro-batch with no image under transformers 5.
"""
