"""Logit-level SDPO through verl's logits-processor hook, on a packed micro-batch as verl's engine builds it: the
student's top-k ids, the teacher's log-probs at them, and the per-token loss equal a dense [B, L, V] computation of
the same divergence; the gradient reaches only the logits that score response tokens."""

import math

import pytest
import torch
import torch.nn.functional as F
from verl.utils import tensordict_utils as tu
from verl.workers.utils.padding import no_padding_2_padding

from verl_cua.integrations.verl.sdpo import logit

VOCAB, TOPK = 50, 5
PROMPTS, RESPONSES = [4, 6], [3, 5]


def _batch(mode, ids=None, teacher=None):
    """A no-padding micro-batch of two rows (prompt + response tokens), with the SDPO pass flag."""
    torch.manual_seed(0)
    seqs = [torch.randint(0, VOCAB, (p + r,)) for p, r in zip(PROMPTS, RESPONSES, strict=True)]
    fields = {
        "input_ids": torch.nested.as_nested_tensor(seqs, layout=torch.jagged),
        "prompts": torch.nested.as_nested_tensor(
            [s[:p] for s, p in zip(seqs, PROMPTS, strict=True)], layout=torch.jagged
        ),
        "responses": torch.nested.as_nested_tensor(
            [s[p:] for s, p in zip(seqs, PROMPTS, strict=True)], layout=torch.jagged
        ),
    }
    if ids is not None:
        fields[logit.IDS] = torch.nested.as_nested_tensor(ids, layout=torch.jagged)
        fields[logit.TEACHER] = torch.nested.as_nested_tensor(teacher, layout=torch.jagged)
    return tu.get_tensordict(tensor_dict=fields, non_tensor_dict={logit.PASS: mode})


def _response_logits(logits, batch):
    """Per row, the [response_len, V] logits that score its response tokens (dense reference, verl's shift)."""
    out, start = [], 0
    for p, r in zip(PROMPTS, RESPONSES, strict=True):
        out.append(logits[start + p - 1 : start + p - 1 + r])
        start += p + r
    return out


def _dense_jsd(student_logp, teacher_logp, ids, alpha):
    """The reference: full-vocabulary log-softmax, the student's top-k ids, a tail bucket, then SDPO's divergence:
    KL(teacher||student) at alpha 0, KL(student||teacher) at 1, the generalised JSD between (mixture
    (1 - alpha) s + alpha t)."""

    def buckets(logp):
        top = logp.gather(-1, ids)
        tail = torch.log1p(-top.exp().sum(-1, keepdim=True))
        return torch.cat([top, tail], -1)

    s, t = buckets(student_logp), buckets(teacher_logp)
    if alpha == 0.0:
        return (t.exp() * (t - s)).sum(-1)
    if alpha == 1.0:
        return (s.exp() * (s - t)).sum(-1)
    m = torch.log((1 - alpha) * s.exp() + alpha * t.exp())
    return (1 - alpha) * (s.exp() * (s - m)).sum(-1) + alpha * (t.exp() * (t - m)).sum(-1)


def test_three_passes_equal_a_dense_computation():
    nnz = sum(PROMPTS) + sum(RESPONSES)
    student = torch.randn(nnz, VOCAB, generator=torch.Generator().manual_seed(1)) * 3
    teacher = torch.randn(nnz, VOCAB, generator=torch.Generator().manual_seed(2)) * 3

    # 1. student_topk: per response token, the ids of the student's k largest logits
    out = logit.logits_processor(student.unsqueeze(0), _batch("student_topk"), TOPK, 0.5, True)
    assert set(out) == set(logit.pass_fields(TOPK)) and all(v.shape == (1, nnz) for v in out.values())
    full = torch.stack([out[logit.field(j)][0] for j in range(TOPK)], -1)
    dense = _response_logits(student, None)
    ids = [d.topk(TOPK, -1).indices for d in dense]
    for row, (p, r) in enumerate(zip(PROMPTS, RESPONSES, strict=True)):
        start = sum(PROMPTS[:row]) + sum(RESPONSES[:row])
        assert torch.equal(full[start + p - 1 : start + p - 1 + r].long(), ids[row])
    positions = logit.response_positions(_batch("student_topk"))
    outside = torch.ones(nnz, dtype=torch.bool)
    outside[positions] = False
    assert (full[outside] == 0).all()  # prompt positions carry nothing

    # 2. teacher_gather: the teacher's log-probs at the student's ids
    ids_f = [i.float() for i in ids]
    zeros = [torch.zeros(r, TOPK) for r in RESPONSES]
    out = logit.logits_processor(teacher.unsqueeze(0), _batch("teacher_gather", ids_f, zeros), TOPK, 0.5, True)
    full = torch.stack([out[logit.field(j)][0] for j in range(TOPK)], -1)
    teacher_rows = [
        F.log_softmax(t, -1).gather(-1, i) for t, i in zip(_response_logits(teacher, None), ids, strict=True)
    ]
    for row, (p, r) in enumerate(zip(PROMPTS, RESPONSES, strict=True)):
        start = sum(PROMPTS[:row]) + sum(RESPONSES[:row])
        torch.testing.assert_close(full[start + p - 1 : start + p - 1 + r], teacher_rows[row])

    # 3. train: the per-token divergence, with gradient into the student's logits at response positions only
    for alpha in (0.0, 0.5, 1.0):
        leaf = student.clone().requires_grad_(True)
        batch = _batch("train", ids_f, teacher_rows)
        loss = logit.logits_processor(leaf.unsqueeze(0), batch, TOPK, alpha, True)[logit.LOSS][0]
        expected = torch.zeros(nnz)
        for row, (p, r) in enumerate(zip(PROMPTS, RESPONSES, strict=True)):
            start = sum(PROMPTS[:row]) + sum(RESPONSES[:row])
            s = F.log_softmax(student[start + p - 1 : start + p - 1 + r], -1)
            t = F.log_softmax(teacher[start + p - 1 : start + p - 1 + r], -1)
            expected[start + p - 1 : start + p - 1 + r] = _dense_jsd(s, t, ids[row], alpha)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)
        loss.sum().backward()
        assert leaf.grad[outside].abs().max() == 0 and leaf.grad[positions].abs().max() > 0


def test_the_train_output_lines_up_with_verl_response_slicing():
    """verl slices per-token outputs with no_padding_2_padding; the loss lands on the response tokens."""
    nnz = sum(PROMPTS) + sum(RESPONSES)
    logits = torch.randn(nnz, VOCAB)
    ids = [torch.arange(TOPK).float().expand(r, TOPK) for r in RESPONSES]
    teacher = [torch.full((r, TOPK), math.log(0.1)) for r in RESPONSES]
    batch = _batch("train", ids, teacher)
    loss = logit.logits_processor(logits.unsqueeze(0), batch, TOPK, 0.5, True)[logit.LOSS][0]
    nested = torch.nested.nested_tensor_from_jagged(loss, batch["input_ids"].offsets())
    per_row = no_padding_2_padding(nested, batch)
    assert per_row.shape == (2, max(RESPONSES))
    assert (per_row[0, : RESPONSES[0]] > 0).all() and (per_row[0, RESPONSES[0] :] == 0).all()
    assert (per_row[1] > 0).all()


def test_a_missing_pass_flag_is_one_line():
    batch = _batch("nonsense")
    with pytest.raises(ValueError, match="cua_sdpo_pass in"):
        logit.logits_processor(torch.randn(1, 18, VOCAB), batch, TOPK, 0.5, True)


def test_only_the_teacher_gather_pass_runs_on_the_ema_teachers_weights():
    """Between cua_ema_swap_in and _out a worker's actor holds the EMA teacher: the student's top-k ids (and the
    update) would then be the teacher's, so those passes refuse; the teacher's gather runs."""
    from types import SimpleNamespace

    from verl_cua.integrations.verl.actor_worker import CuaActorRolloutRefWorker as W

    module = torch.nn.Linear(2, 1, bias=False)
    worker = SimpleNamespace(actor=SimpleNamespace(engine=SimpleNamespace(module=module)))
    worker._cua_params = lambda: W._cua_params(worker)
    W.cua_ema_update(worker, 1.0)
    logits = torch.randn(1, sum(PROMPTS) + sum(RESPONSES), VOCAB)
    ids = [torch.zeros(r, TOPK, dtype=torch.long) for r in RESPONSES]
    teacher = [torch.full((r, TOPK), -3.0) for r in RESPONSES]
    W.cua_ema_swap_in(worker)
    try:
        for mode in ("student_topk", "train"):
            with pytest.raises(RuntimeError, match=f"SDPO {mode} pass ran on the EMA teacher's weights"):
                logit.logits_processor(logits, _batch(mode, ids, teacher), TOPK, 0.5, True)
        assert logit.field(0) in logit.logits_processor(logits, _batch("teacher_gather", ids, teacher), TOPK, 0.5, True)
    finally:
        W.cua_ema_swap_out(worker)
    assert logit.field(0) in logit.logits_processor(logits, _batch("student_topk"), TOPK, 0.5, True)


def _loss_batch(loss_mask_rows):
    """A two-row micro-batch as the SDPO actor loss reads it: row 0 reprompted (2 model tokens), row 1 not (3)."""
    prompts = [torch.ones(2, dtype=torch.long), torch.ones(2, dtype=torch.long)]
    responses = [torch.ones(2, dtype=torch.long), torch.ones(3, dtype=torch.long)]

    def nested(rows):
        return torch.nested.as_nested_tensor(rows, layout=torch.jagged)

    fields = {
        "prompts": nested(prompts),
        "responses": nested(responses),
        "input_ids": nested([torch.cat([p, r]) for p, r in zip(prompts, responses, strict=True)]),
        "response_mask": nested([torch.ones(2), torch.ones(3)]),
        "loss_mask": nested(loss_mask_rows),
        "old_log_probs": nested([torch.full((2,), -1.0), torch.full((3,), -1.0)]),
        "advantages": nested([torch.full((2,), 0.5), torch.zeros(3)]),
        "cua_sdpo_mask": nested([torch.ones(2), torch.zeros(3)]),
    }
    batch_num_tokens = int(sum(m.sum() for m in loss_mask_rows))
    non_tensor = {"dp_size": 1, "batch_num_tokens": batch_num_tokens, "global_batch_size": 2, logit.PASS: "train"}
    data = tu.get_tensordict(tensor_dict=fields, non_tensor_dict=non_tensor)
    log_probs = nested([torch.full((4,), -1.0), torch.full((5,), -1.0)])  # = old: on-policy, weight 1
    return data, {"log_probs": log_probs}


def test_the_sdpo_loss_is_a_mean_over_reprompted_tokens():
    """normalize=reprompted (the trainer sets loss_mask to the reprompted tokens, so verl counts only those): the
    token loss is -A log pi = -0.5 * -1 = 0.5 averaged over row 0's 2 tokens, whatever the unreprompted row's length;
    normalize=all divides the same sum by all 5 model tokens."""
    from types import SimpleNamespace

    from verl_cua.integrations.verl.config.schema import CuaConfig
    from verl_cua.integrations.verl.estimator_plan import plan_for
    from verl_cua.integrations.verl.sdpo.loss import sdpo_actor_loss

    config = SimpleNamespace(loss_agg_mode="token-mean", loss_scale_factor=None, entropy_coeff=0.0, use_kl_loss=False)
    cua = CuaConfig.from_mapping({"sdpo": {"loss": "token", "is_clip": 2.0}})
    plan = plan_for("sdpo", cua)
    data, output = _loss_batch([torch.ones(2), torch.zeros(3)])
    loss, metrics = sdpo_actor_loss(config, output, data, plan, cua.sdpo)
    assert float(loss) == pytest.approx(0.5)
    data, output = _loss_batch([torch.ones(2), torch.ones(3)])
    loss, _ = sdpo_actor_loss(config, output, data, plan, cua.sdpo)
    assert float(loss) == pytest.approx(0.5 * 2 / 5)


def test_a_pass_output_keeps_only_response_positions_in_one_field():
    """What the worker hands TransferQueue after a top-k pass: one field of [response_len * k] per row that unpacks
    to the processor's values at the response tokens, instead of k fields over the whole sequence."""
    from tensordict import TensorDict

    nnz = sum(PROMPTS) + sum(RESPONSES)
    student = torch.randn(nnz, VOCAB, generator=torch.Generator().manual_seed(1)) * 3
    batch = _batch("student_topk")
    out = logit.logits_processor(student.unsqueeze(0), batch, TOPK, 0.5, True)
    cu_seqlens = batch["input_ids"].offsets()
    nested = {k: torch.nested.nested_tensor_from_jagged(v[0], cu_seqlens) for k, v in out.items()}  # verl's engine
    output = TensorDict(nested, batch_size=[len(PROMPTS)])
    before = sum(v.values().numel() * 4 for v in output.values())
    mask = torch.nested.as_nested_tensor([torch.ones(r) for r in RESPONSES], layout=torch.jagged)
    packed = logit.pack_pass_output(output, mask)
    assert list(packed.keys()) == [logit.PACKED]
    rows = logit.unpack_rows(packed[logit.PACKED], TOPK)
    want = [d.topk(TOPK, -1).indices for d in _response_logits(student, None)]
    assert [r.shape for r in rows] == [(n, TOPK) for n in RESPONSES]
    assert all(torch.equal(r.long(), w) for r, w in zip(rows, want, strict=True))
    assert packed[logit.PACKED].values().numel() * 4 * nnz == before * sum(RESPONSES)  # response / sequence
    plain = TensorDict({"log_probs": nested[logit.field(0)]}, batch_size=[len(PROMPTS)])
    assert logit.pack_pass_output(plain, mask) is plain and list(plain.keys()) == ["log_probs"]


def test_loss_fields_go_to_transfer_queue_one_call_per_row_shape(monkeypatch):
    """Rows whose fields have the same shapes share one put, stacked; each row keeps its own values."""
    import transfer_queue as tq

    from verl_cua.integrations.verl.rows.fields import put_row_fields

    calls = []
    monkeypatch.setattr(tq, "kv_batch_put", lambda keys, partition_id, fields: calls.append((keys, fields)))
    lengths = [3, 5, 3, 3, 5]
    rows = [{logit.IDS: torch.full((n, TOPK), float(i)), "mask": torch.ones(n) * i} for i, n in enumerate(lengths)]
    put_row_fields([f"k{i}" for i in range(5)], "train", rows)
    assert sorted(keys for keys, _ in calls) == [["k0", "k2", "k3"], ["k1", "k4"]]
    for keys, fields in calls:
        for j, key in enumerate(keys):
            i = int(key[1:])
            assert torch.equal(fields[logit.IDS][j], rows[i][logit.IDS]) and torch.equal(
                fields["mask"][j], rows[i]["mask"]
            )
