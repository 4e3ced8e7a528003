"""A checked `maybe_fix_3d_position_ids` for verl 0.9.1's workers: Qwen-VL M-RoPE position ids in the right layout.

verl stores each row's M-RoPE position ids as a (C, L_i) tensor (C = 4 position channels) and TransferQueue packs
the rows with `torch.nested.as_nested_tensor(rows, layout=torch.jagged)`. When the rows have different lengths
PyTorch makes the sequence the ragged dimension (values (C, sum L_i)); when every row has the same length, or the
batch is one row, it makes the channel dimension ragged instead (values (B*C, L), offsets 0, C, 2C, ...). verl's
own `maybe_fix_3d_position_ids` then marks dimension 2 as ragged without checking, so the offsets say C tokens a
row: `update_actor` crashes in `split_with_sizes`, and `compute_log_prob`'s chunking silently rebuilds rows of
length C (text positions 1..C, then zeros). A converging policy that writes same-length clicks on same-length
prompts reaches this by itself (verl issue #7899, fix proposed in PR #7901). This version rebuilds the wrong layout
as (C, sum L_i) with offsets cumsum(L_i); a right one only gets its ragged index set, as upstream does.
"""

from __future__ import annotations

import torch


def channels_ragged(position_ids: torch.Tensor, row_lengths: list[int] | None) -> bool:
    """Whether a 3-D jagged `position_ids` was packed ragged over its channels (values (B*C, L)), not its tokens."""
    values, offsets = position_ids.values(), position_ids.offsets()
    if values.dim() != 2:
        return False
    steps = offsets.diff().tolist()
    if row_lengths is not None and len(row_lengths) == len(steps):
        return steps != list(row_lengths) and len(set(steps)) == 1 and values.shape[0] == int(offsets[-1])
    return values.shape[0] == int(offsets[-1]) != values.shape[1]


def tokens_ragged(position_ids: torch.Tensor) -> torch.Tensor:
    """The same rows as a jagged tensor ragged over tokens: values (C, sum L_i), offsets cumsum(L_i)."""
    rows = list(position_ids.values().split(position_ids.offsets().diff().tolist(), dim=0))
    lengths = torch.tensor([0] + [row.shape[1] for row in rows], dtype=torch.long)
    return torch.nested.nested_tensor_from_jagged(torch.cat(rows, dim=1), lengths.cumsum(0), jagged_dim=2)


def checked_fix_3d_position_ids(data) -> None:
    """verl's `maybe_fix_3d_position_ids`, checked: a channel-ragged `position_ids` is rebuilt token-ragged."""
    if "position_ids" not in data.keys():
        return
    position_ids = data["position_ids"]
    if not (position_ids.is_nested and position_ids.dim() == 3):
        return
    lengths = None
    if "input_ids" in data.keys() and data["input_ids"].is_nested:
        lengths = data["input_ids"].offsets().diff().tolist()
    if channels_ragged(position_ids, lengths):
        data["position_ids"] = tokens_ragged(position_ids)
    else:
        position_ids._ragged_idx = 2


def install(module) -> None:
    """Replace `module.maybe_fix_3d_position_ids` (a verl module that has it) with the checked version."""
    if hasattr(module, "maybe_fix_3d_position_ids"):
        module.maybe_fix_3d_position_ids = checked_fix_3d_position_ids
