"""Logit-level SDPO on verl's engine, through the logits-processor hook verl's own top-k distillation uses (the
processor sees a micro-batch's logits while they are in memory, so [B, L, V] is never stored):

1. `student_topk`: the student's top-k token ids at every response token (a forward on the student rows);
2. `teacher_gather`: the teacher's log-probs at those ids, in the teacher context (a forward on the teacher rows);
3. `train`: in the actor update, the student's log-probs at the same ids, with gradient, and the per-token
   divergence over the k ids plus a tail bucket (`verl_cua.algos.sdpo.sdpo_logit_loss`).

verl's processor may only return one value per token of the whole sequence, so passes 1 and 2 return k fields
`cua_sdpo_k{j}`; before the worker hands its output to TransferQueue, `pack_pass_output` keeps their response
positions only, as one field `PACKED` (a row's [response_len, k] values, flattened): ~response/sequence of the bytes
(a 6.5k-token step row with a 100-token action: 65x fewer). The trainer unpacks them into `[response_len, k]` rows
(`IDS`, `TEACHER`) that pass 3 reads from the batch."""

from __future__ import annotations

import torch

from verl_cua.algos.sdpo import sdpo_logit_loss, topk_log_probs
from verl_cua.integrations.verl.sdpo import IDS, TEACHER

PASS = "cua_sdpo_pass"  # non-tensor flag of a batch: which of the passes above the processor runs
PASSES = ("student_topk", "teacher_gather", "train")
LOSS = "cua_sdpo_logit_loss"  # per-token output of the train pass
PACKED = "cua_sdpo_topk"  # per row [response_len * k]: a pass's k values at each response token, row-major
_EXACT_IDS = 2**24
# On a worker: whether the actor's module holds the EMA teacher's weights (between cua_ema_swap_in and _out). Only
# the teacher_gather pass may run then; the student's top-k ids and the update need the live policy's weights.
_teacher_weights_in = False


def mark_teacher_weights(swapped_in: bool) -> None:
    """Record on this worker whether the EMA teacher's weights are in the actor (the passes check it)."""
    global _teacher_weights_in
    _teacher_weights_in = swapped_in


def field(j: int) -> str:
    """Name of the j-th per-token output of the student_topk and teacher_gather passes."""
    return f"cua_sdpo_k{j}"


def response_positions(data) -> torch.Tensor:
    """Flat positions (in the packed micro-batch) of the logits that score each response token, row by row."""
    seq_ends = data["input_ids"].offsets()[1:]
    response_lens = data["responses"].offsets().diff()
    spans = [torch.arange(int(end - n - 1), int(end - 1)) for end, n in zip(seq_ends, response_lens, strict=True)]
    return torch.cat(spans) if spans else torch.zeros(0, dtype=torch.long)


def logits_processor(student_logits: torch.Tensor, data, topk: int, alpha: float, add_tail: bool) -> dict:
    """verl's logits-processor call: the outputs of this micro-batch's pass, each of shape (1, nnz)."""
    from verl.utils import tensordict_utils as tu

    mode = tu.get_non_tensor_data(data=data, key=PASS, default=None)
    if mode not in PASSES:
        raise ValueError(f"the SDPO logits processor needs {PASS} in {PASSES}, got {mode!r}")
    if _teacher_weights_in and mode != "teacher_gather":
        raise RuntimeError(f"the SDPO {mode} pass ran on the EMA teacher's weights; it needs the live policy's")
    logits = student_logits.squeeze(0)
    nnz, vocab = logits.shape
    if vocab >= _EXACT_IDS:
        raise ValueError(f"the logit-level SDPO loss stores token ids as float32, exact below {_EXACT_IDS}")
    pos = response_positions(data).to(logits.device)
    if pos.numel() and int(pos.max()) >= nnz:
        raise ValueError(
            "the logit-level SDPO loss needs every token of the micro-batch on this rank (no Ulysses sequence "
            "parallelism); set cua.sdpo.loss=token or ulysses_sequence_parallel_size=1"
        )
    picked = logits.index_select(0, pos)  # [n_response_tokens, V]
    if mode == "student_topk":
        ids = picked.topk(topk, dim=-1).indices
        return _spread_columns(ids.float(), pos, nnz)
    ids = data[IDS].values().to(logits.device).long()
    if ids.shape[0] != pos.numel():
        raise ValueError(f"{IDS} holds {ids.shape[0]} response tokens, the micro-batch {pos.numel()}")
    at_ids, _ = topk_log_probs(picked.float(), ids=ids)
    if mode == "teacher_gather":
        return _spread_columns(at_ids.detach(), pos, nnz)
    teacher = data[TEACHER].values().to(logits.device).float()
    loss = sdpo_logit_loss(at_ids, teacher, alpha=alpha, add_tail=add_tail)
    out = torch.zeros(nnz, dtype=loss.dtype, device=loss.device).index_put((pos,), loss)
    return {LOSS: out.unsqueeze(0)}


def _spread_columns(values: torch.Tensor, pos: torch.Tensor, nnz: int) -> dict:
    """[n, k] values at positions `pos` -> k outputs of shape (1, nnz), zero elsewhere."""
    full = torch.zeros(nnz, values.shape[-1], dtype=torch.float32, device=values.device)
    full[pos] = values.float()
    return {field(j): full[:, j].unsqueeze(0) for j in range(values.shape[-1])}


def pack_pass_output(output, response_mask):
    """A top-k pass's output with its k per-token fields replaced by `PACKED` (response positions only)."""
    from verl.workers.utils.padding import response_from_nested

    if output is None or field(0) not in output.keys():
        return output
    topk = 0
    while field(topk) in output.keys():
        topk += 1
    columns = [response_from_nested(output[field(j)], response_mask).unbind(0) for j in range(topk)]
    rows = [torch.stack(cols, dim=-1).reshape(-1) for cols in zip(*columns, strict=True)]
    for j in range(topk):
        del output[field(j)]
    output[PACKED] = torch.nested.as_nested_tensor(rows, layout=torch.jagged)
    return output


def unpack_rows(packed, topk: int) -> list[torch.Tensor]:
    """`PACKED` of a TransferQueue batch as one [response_len, k] tensor per row."""
    rows = packed.unbind(0) if getattr(packed, "is_nested", False) else list(packed)
    return [row.reshape(-1, topk) for row in rows]


def pass_fields(topk: int) -> list[str]:
    """The per-token fields the logits processor returns to verl in a student_topk / teacher_gather micro-batch."""
    return [field(j) for j in range(topk)]
