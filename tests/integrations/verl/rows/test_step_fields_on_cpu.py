"""The step's per-row fields come from TransferQueue once per batch and are shared by every hook: replay, the teacher
pass, the advantage step, the metrics and the buffer (the e2e runs assert `cua/step_field_fetches == 1`). A field the
rows lack comes back absent, as real TransferQueue answers (checked on it below); its errors propagate, unretried."""

import random

import pytest
import torch
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta

from verl_cua.algos.success_buffer import SuccessBuffer
from verl_cua.integrations.verl.buffer import replay as replay_injection
from verl_cua.integrations.verl.rows import step_fields
from verl_cua.integrations.verl.rows.step_fields import StepFieldsView


class _Store:
    """TransferQueue's `kv_batch_get` over a dict of rows, counting calls; a field some row lacks is left out of the
    answer, as TransferQueue does (`test_real_transfer_queue_leaves_absent_fields_out_and_raises_real_errors`)."""

    def __init__(self, rows):
        self.rows, self.calls = rows, []

    def get(self, keys, partition_id=None, select_fields=None):
        self.calls.append(list(select_fields or []))
        fields = select_fields or list(self.rows[keys[0]])
        return {f: [self.rows[k][f] for k in keys] for f in fields if all(f in self.rows[k] for k in keys)}


def _row(uid, session, score=0.0, infra=False):
    extra = {"cua_score": score, "cua_instance": "t@seed=1", "cua_infra_failure": infra}
    return {"uid": uid, "session_id": session, "extra_fields": extra, "response_mask": torch.ones(3)}


@pytest.fixture
def store(monkeypatch):
    rows = {"a_0": _row("a", 0, 1.0), "a_1": _row("a", 1, infra=True), "b_0": _row("b", 2), "b_1": _row("b", 3)}
    store = _Store(rows)
    monkeypatch.setattr(step_fields.tq, "kv_batch_get", store.get)
    return store


def _batch(keys):
    return KVBatchMeta(keys=list(keys), tags=[{"seq_len": 3} for _ in keys], partition_id="train")


def test_one_fetch_per_batch_shared_by_every_reader(store):
    view, batch = StepFieldsView(), _batch(["a_0", "a_1", "b_0", "b_1"])
    first = view.of(batch)
    assert view.of(_batch(batch.keys)) is first  # another KVBatchMeta of the same rows: no second call
    assert len(store.calls) == 1 and view.fetches == 1
    assert first.uids == ["a", "a", "b", "b"] and first.sessions == [0, 1, 2, 3]
    assert first.infra == [False, True, False, False] and first.extra[0]["cua_score"] == 1.0
    view.of(_batch(["a_0", "b_0"]))  # new keys (replay injected rows, verl padded): fetched again
    assert view.fetches == 2
    view.clear()
    view.of(_batch(["a_0", "b_0"]))
    assert view.fetches == 3


def test_rows_without_a_session_or_mask_are_read_without_them(store):
    for row in store.rows.values():
        del row["session_id"], row["response_mask"]
    fields = StepFieldsView().of(_batch(["b_0", "b_1"]))
    assert fields.sessions == [0, 1] and fields.response_mask is None and fields.uids == ["b", "b"]
    assert len(store.calls) == 1  # one call, whatever the rows hold


def test_a_transfer_queue_error_propagates_from_the_one_call(store, monkeypatch):
    """Not a field left out but an error (here TransferQueue's own for keys it does not hold): it comes back as is,
    after one call, instead of as rows fetched again without `response_mask` and `session_id`."""

    def fails(keys, partition_id=None, select_fields=None):
        store.calls.append(list(select_fields))
        raise ValueError("keys or partition were not found!")

    monkeypatch.setattr(step_fields.tq, "kv_batch_get", fails)
    with pytest.raises(ValueError, match="not found"):
        StepFieldsView().of(_batch(["a_0", "a_1"]))
    assert store.calls == [list(step_fields.FIELDS)]


@pytest.mark.e2e  # starts Ray for TransferQueue's controller and storage
def test_real_transfer_queue_leaves_absent_fields_out_and_raises_real_errors():
    """What `fetch_step_fields` relies on, on TransferQueue itself: selecting a field the rows lack (on every row, or
    on some) answers without it rather than raising, and keys it does not hold raise ValueError."""
    import ray
    import transfer_queue as tq
    from tensordict import TensorDict
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    ray.init(num_cpus=6, include_dashboard=False, log_to_driver=False)  # the controller and two storage units
    try:
        tq.init()
        rows = [{"uid": uid, "extra_fields": {"cua_score": 1.0}, "response_mask": torch.ones(3)} for uid in "ab"]
        for i, row in enumerate(rows):
            tq.kv_batch_put(keys=[f"k{i}"], partition_id="train", fields=list_of_dict_to_tensordict([row]), tags=[{}])
        fields = step_fields.fetch_step_fields(_batch(["k0", "k1"]))  # no session_id, no responses
        assert fields.uids == ["a", "b"] and fields.sessions == [0, 1] and fields.responses is None
        assert [m.tolist() for m in fields.response_mask.unbind(0)] == [[1.0] * 3] * 2
        tq.kv_batch_put(keys=["k0"], partition_id="train", fields=TensorDict({"session_id": torch.tensor([7])}, [1]))
        assert step_fields.fetch_step_fields(_batch(["k0", "k1"])).sessions == [0, 1]  # on k0 only: left out
        with pytest.raises(ValueError, match="not found"):
            step_fields.fetch_step_fields(KVBatchMeta(keys=["k0"], tags=[{}], partition_id="elsewhere"))
    finally:
        ray.shutdown()


def test_replay_reads_the_steps_view_and_leaves_it_for_the_hooks_after_it(store):
    buffer = SuccessBuffer()
    buffer.add("other@seed=9", "k", {"actions": ["a"], "rows": []})  # not empty, but for no task of this batch
    view, batch = StepFieldsView(), _batch(["a_0", "a_1", "b_0", "b_1"])
    out, metrics = replay_injection.inject_replays(batch, buffer, {}, random.Random(0), view)
    assert out is batch and metrics["replay/injected"] == 0.0
    view.of(batch)  # the teacher pass, the advantage step, the metrics
    assert view.fetches == 1 and len(store.calls) == 1


def test_rows_replay_rewrote_under_their_keys_are_fetched_again(monkeypatch):
    """A replayed one-row episode takes its victim's key: the hooks after replay must read the replayed row, not the
    view's copy of the victim (the CPU chaos run crashed on the stale response mask)."""
    rows = {f"{uid}_{s}_0": _row(uid, s, score) for uid, s, score in (("a", 0, 1.0), ("a", 1, 0.0), ("b", 2, 0.0),
                                                                       ("b", 3, 0.0))}  # fmt: skip
    for row in rows.values():  # group b: every episode failed on t@seed=1
        row["prompts"], row["responses"] = torch.ones(4), torch.ones(3)
    store = _Store(rows)
    monkeypatch.setattr(step_fields.tq, "kv_batch_get", store.get)
    monkeypatch.setattr(replay_injection.tq, "kv_clear", lambda keys, partition_id=None: None)
    monkeypatch.setattr(
        replay_injection, "put_rows", lambda keys, pid, fields, tags: store.rows.update(zip(keys, fields, strict=True))
    )
    success = {"prompts": torch.ones(5), "responses": torch.ones(7), "response_mask": torch.ones(7),
               "extra_fields": {"cua_score": 1.0, "cua_instance": "t@seed=1"}}  # fmt: skip
    buffer = SuccessBuffer()
    buffer.add("t@seed=1", "k", {"actions": ["a"], "rows": [success]})
    view, batch = StepFieldsView(), _batch(list(rows))
    out, metrics = replay_injection.inject_replays(batch, buffer, {}, random.Random(0), view)
    assert metrics["replay/injected"] == 1.0 and list(out.keys) == list(batch.keys)  # the same keys, new content
    fields = view.of(out)
    assert view.fetches == 2
    replayed = [i for i, e in enumerate(fields.extra) if e.get("cua_replayed")]
    assert len(replayed) == 1 and fields.uids[replayed[0]] == "b" and fields.response_mask[replayed[0]].shape == (7,)
