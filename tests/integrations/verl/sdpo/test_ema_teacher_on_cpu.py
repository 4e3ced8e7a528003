"""The SDPO EMA teacher on a worker's shard: the first update copies the weights, later ones average with the
rate; swapping in puts the EMA weights in the module and swapping out restores the policy's exactly."""

from types import SimpleNamespace

import pytest
import torch

from verl_cua.integrations.verl.actor_worker import CuaActorRolloutRefWorker as W


def _worker(module):
    return SimpleNamespace(actor=SimpleNamespace(engine=SimpleNamespace(module=module)), _cua_params=None)


def test_ema_update_and_swap_round_trip():
    module = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        module.weight.copy_(torch.tensor([[1.0, 2.0]]))
    w = _worker(module)
    w._cua_params = lambda: W._cua_params(w)
    W.cua_ema_update(w, 0.25)  # first call: a copy
    assert w._cua_ema[0].tolist() == [[1.0, 2.0]]
    with torch.no_grad():
        module.weight.copy_(torch.tensor([[5.0, 6.0]]))
    W.cua_ema_update(w, 0.25)  # 0.75 * [1, 2] + 0.25 * [5, 6]
    assert w._cua_ema[0][0].tolist() == pytest.approx([2.0, 3.0])
    W.cua_ema_swap_in(w)
    assert module.weight[0].tolist() == [2.0, 3.0]
    W.cua_ema_swap_out(w)
    assert module.weight[0].tolist() == [5.0, 6.0]
    W.cua_ema_swap_out(w)  # idempotent
    assert module.weight[0].tolist() == [5.0, 6.0]


def test_ema_reads_offloaded_weights_only_after_the_pending_copy_lands(monkeypatch):
    """A stand-in for verl's `non_blocking=True` offload: the host buffer holds stale values until the device is
    synchronized. The EMA update and the swaps must wait for it, or the teacher mixes in the stale buffer."""
    from verl_cua.algos import ema

    module = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        module.weight.copy_(torch.tensor([[-7.0, -7.0]]))  # what the pinned buffer held before the copy
    pending = [torch.tensor([[4.0, 8.0]])]  # the offload's values, still in flight

    def land_pending_copies():
        with torch.no_grad():
            while pending:
                module.weight.copy_(pending.pop())

    monkeypatch.setattr(ema, "settle", land_pending_copies)
    w = _worker(module)
    w._cua_params = lambda: W._cua_params(w)
    W.cua_ema_update(w, 1.0)
    assert w._cua_ema[0].tolist() == [[4.0, 8.0]]
    pending.append(torch.tensor([[8.0, 12.0]]))  # the next update's offload, in flight again
    W.cua_ema_update(w, 0.5)
    assert w._cua_ema[0].tolist() == [[6.0, 10.0]]
    pending.append(torch.tensor([[0.0, 2.0]]))
    W.cua_ema_swap_in(w)
    W.cua_ema_swap_out(w)
    assert module.weight.tolist() == [[0.0, 2.0]]  # the backup was taken from the landed copy
    pending.append(torch.tensor([[6.0, 10.0]]))
    assert W.cua_ema_distance(w) == (0.0, 136.0)


def test_settle_waits_on_the_accelerator_and_is_a_no_op_without_one(monkeypatch):
    """It synchronizes the accelerator torch reports, and does nothing on a machine without one."""
    from verl_cua.algos import ema

    calls = []
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda *a: calls.append("sync"))
    ema.settle()
    assert calls == ["sync"]
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ema.settle()
    assert calls == ["sync"]
