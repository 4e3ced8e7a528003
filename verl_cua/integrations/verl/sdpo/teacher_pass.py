"""The SDPO teacher pass on verl's V1 trainer: reprompted rows go to TransferQueue under teacher keys, the actor's
`compute_log_prob` scores the same response tokens in the teacher context, and the driver keeps the result."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta
from verl.workers.utils.padding import response_from_nested

from verl_cua.integrations.verl.rows.fields import put_rows, row_values
from verl_cua.integrations.verl.rows.step_fields import StepFields
from verl_cua.integrations.verl.sdpo import logit
from verl_cua.integrations.verl.sdpo.context import BLOCK_HEADER, TeacherContextBuilder, feedback_block, fit_demo
from verl_cua.integrations.verl.sdpo.plan import RepromptPlan, plan_reprompts

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import SdpoConfig
    from verl_cua.integrations.verl.estimator_plan import EstimatorPlan

logger = logging.getLogger(__name__)

TEACHER_SUFFIX = "::sdpo_teacher"
# What planning reads of every row; whole rows are fetched only for the rows the pass uses.
# Fields the teacher rows do not inherit from their student rows (derived ones, recomputed or unused).
_NOT_COPIED = ("log_probs", "entropy", "old_log_probs", "ref_log_prob", "advantages", "returns", "values")


@dataclass
class TeacherResult:
    """Per row: reprompted or not, success, and the teacher's response log-probs where reprompted."""

    reprompt: list[bool]
    success: list[bool]
    teacher_log_probs: dict[int, torch.Tensor] = field(default_factory=dict)
    topk_ids: dict[int, torch.Tensor] = field(default_factory=dict)  # logit loss: [response_len, k] student ids
    teacher_topk: dict[int, torch.Tensor] = field(default_factory=dict)  # logit loss: teacher log-probs at them
    metrics: dict[str, float] = field(default_factory=dict)


def run_teacher_pass(
    actor_wg,
    builder: TeacherContextBuilder,
    batch: KVBatchMeta,
    fields: StepFields,
    plan: EstimatorPlan,
    sdpo: SdpoConfig,
    temperature: float,
    multiple: int = 1,
    buffer_demos: Mapping[str, Any] | None = None,
    teacher_weights: Callable[[], AbstractContextManager] = nullcontext,
) -> TeacherResult:
    """Build the teacher rows of `batch` (planned from the step's `fields` under the `cua.sdpo` settings), score them
    on the actor, and return the teacher log-probs per row.

    The logit loss's top-k ids (when `plan.topk_passes`; never for sdpo_grpo) come from the live student (the
    actor's own weights, in the student context); `teacher_weights` is entered around the teacher's scoring alone
    (the EMA teacher swaps its weights in there).
    The teacher batch is padded with copies of its last row to a multiple of `multiple` (data-parallel ranks x
    log-prob micro-batch), as verl's engine requires; the copies' results are dropped."""
    extra = fields.extra
    reprompts = plan_reprompts(extra, fields.uids, fields.sessions, sdpo, buffer_demos)
    result = TeacherResult(reprompt=reprompts.reprompt, success=reprompts.success, metrics=dict(reprompts.metrics))
    rows = [i for i, r in enumerate(reprompts.reprompt) if r]
    if not rows:
        return result

    student = fetch_rows(batch, rows)  # only the reprompted rows come to the driver, and pad rows when needed
    lengths = [int(tag.get("seq_len", 0)) for tag in batch.tags]
    teacher_fields, teacher_tags = [], []
    for i in rows:
        row, tag = _teacher_row(builder, student[i], batch.tags[i], reprompts, i, extra[i], sdpo)
        teacher_fields.append(row)
        teacher_tags.append(tag)
    added = [tag["prompt_len"] - int(student[i]["prompts"].shape[0]) for i, tag in zip(rows, teacher_tags, strict=True)]
    with_image = sum(_has_block_and_image(builder, row["prompts"]) for row in teacher_fields)

    topk = sdpo.topk if plan.topk_passes else 0
    if topk:
        ids = _topk_pass(actor_wg, batch, rows, student, lengths, "student_topk", topk, temperature, multiple)
        for row, row_ids in zip(teacher_fields, ids, strict=True):
            row[logit.IDS] = row_ids
    keys = [batch.keys[i] + TEACHER_SUFFIX for i in rows]
    pads = _pad_rows(len(rows), multiple, lengths, [f["input_ids"].shape[0] for f in teacher_fields])
    student.update(fetch_rows(batch, [j for j in pads if j not in student]))
    for j in pads:
        keys.append(f"{batch.keys[j]}{TEACHER_SUFFIX}::pad{len(keys)}")
        teacher_fields.append(_pad_row(student[j], topk))
        teacher_tags.append(dict(batch.tags[j]))
    meta = put_rows(keys, batch.partition_id, teacher_fields, teacher_tags)
    try:
        meta.extra_info = {"calculate_entropy": False, "compute_loss": False, "temperature": temperature}
        if topk:
            meta.extra_info.update(_pass_info("teacher_gather", distillation_only=False))
        with teacher_weights():
            actor_wg.compute_log_prob(meta)
        select = ["log_probs", "response_mask"] + ([logit.PACKED] if topk else [])
        out = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=select)
        teacher = response_from_nested(out["log_probs"], out["response_mask"]).unbind(0)[: len(rows)]
        if topk:
            gathered = logit.unpack_rows(out[logit.PACKED], topk)[: len(rows)]
            result.topk_ids = {i: t[logit.IDS] for i, t in zip(rows, teacher_fields, strict=False)}
            result.teacher_topk = dict(zip(rows, gathered, strict=True))
    finally:
        tq.kv_clear(keys=keys, partition_id=batch.partition_id)
    result.teacher_log_probs = {i: t.float() for i, t in zip(rows, teacher, strict=True)}
    result.metrics.update(
        {
            "sdpo/teacher_added_tokens_mean": float(sum(added) / len(added)),
            "sdpo/teacher_blocks_with_image": float(with_image),
        }
    )
    return result


def _teacher_row(
    builder: TeacherContextBuilder,
    student: dict,
    tag: dict,
    reprompts: RepromptPlan,
    i: int,
    extra: dict,
    sdpo: SdpoConfig,
) -> tuple[dict, dict]:
    """Row `i`'s teacher row (the student's fields with the feedback block in its prompt) and its tag."""
    demo = reprompts.demo_actions[i]
    if demo:
        demo = fit_demo(demo, sdpo.max_demo_tokens, builder.encode, builder.tokenizer.decode)
    block = feedback_block(
        demo,
        float(extra.get("cua_score", 0.0)),
        reprompts.feedback[i],
        extra.get("cua_final_screenshot") if reprompts.use_image[i] else None,
        sdpo.max_feedback_chars,
    )
    row = dict(student)
    built = builder.build(row["prompts"], row["responses"], row.get("multi_modal_inputs") or {}, block)
    row.update(built)
    tag = dict(tag)
    tag.update(prompt_len=int(built["prompts"].shape[0]), seq_len=int(built["input_ids"].shape[0]))
    return row, tag


def _pass_info(mode: str, distillation_only: bool) -> dict:
    """extra_info of a compute_log_prob call whose logits go through the SDPO logits processor."""
    return {
        "compute_loss": True,
        "distillation_use_topk": True,
        "distillation_only": distillation_only,
        logit.PASS: mode,
    }


def fetch_rows(batch: KVBatchMeta, indices: list[int]) -> dict[int, dict]:
    """Rows `indices` of the batch, every field but the derived ones, as {index: {field: value}}."""
    if not indices:
        return {}
    data = tq.kv_batch_get(keys=[batch.keys[i] for i in indices], partition_id=batch.partition_id)
    columns = {k: row_values(data[k]) for k in data.keys() if k not in _NOT_COPIED}
    return {i: {k: v[n] for k, v in columns.items()} for n, i in enumerate(indices)}


def _pad_row(student_row: dict, topk: int) -> dict:
    """A student row that pads a pass batch (its results are dropped), with zero top-k ids when a pass needs them."""
    row = dict(student_row)
    if topk:
        row[logit.IDS] = torch.zeros(row["responses"].shape[0], topk)
    return row


def _topk_pass(actor_wg, batch, rows, student, lengths, mode, topk, temperature, multiple) -> list[torch.Tensor]:
    """Run one logits-processor pass over copies of the student rows `rows`; [response_len, k] per row."""
    keys = [f"{batch.keys[i]}::sdpo_{mode}" for i in rows]
    tags = [dict(batch.tags[i]) for i in rows]
    fields = [student[i] for i in rows]
    pads = _pad_rows(len(rows), multiple, lengths, [f["input_ids"].shape[0] for f in fields])
    student.update(fetch_rows(batch, [j for j in pads if j not in student]))
    for j in pads:
        keys.append(f"{batch.keys[j]}::sdpo_{mode}::pad{len(keys)}")
        fields.append(_pad_row(student[j], 0))
        tags.append(dict(batch.tags[j]))
    meta = put_rows(keys, batch.partition_id, fields, tags)
    try:
        meta.extra_info = {"calculate_entropy": False, "temperature": temperature, **_pass_info(mode, True)}
        actor_wg.compute_log_prob(meta)
        out = tq.kv_batch_get(keys, batch.partition_id, [logit.PACKED])
        return logit.unpack_rows(out[logit.PACKED], topk)[: len(rows)]
    finally:
        tq.kv_clear(keys=keys, partition_id=batch.partition_id)


def _pad_rows(n: int, multiple: int, student_lengths: list[int], teacher_lengths: list[int]) -> list[int]:
    """Student rows that pad the teacher batch to a multiple (their results are dropped), preferring lengths no
    teacher row has: verl mis-handles a fetched batch whose rows all have the same length."""
    need = (-n) % max(1, multiple)
    if need == 0 and n > 1 and len(set(teacher_lengths)) == 1:
        need = max(1, multiple)
    if need == 0:
        return []
    taken = set(teacher_lengths)
    order = sorted(range(len(student_lengths)), key=lambda j: student_lengths[j] in taken)
    return [order[k % len(order)] for k in range(need)]


def _has_block_and_image(builder: TeacherContextBuilder, prompts: torch.Tensor) -> bool:
    """The teacher prompt holds the feedback block's header and, after it, an image."""
    at = builder.insert_at(prompts)
    text = builder.tokenizer.decode(prompts[:at].tolist())
    header = text.rfind(BLOCK_HEADER)
    return header >= 0 and "<|vision_start|>" in text[header:]
