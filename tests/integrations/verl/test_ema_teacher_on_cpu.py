"""The SDPO EMA teacher on a worker's shard: the first update copies the weights, later ones average with the
rate; swapping in puts the EMA weights in the module and swapping out restores the policy's exactly."""

from types import SimpleNamespace

import pytest
import torch

from verl_cua.integrations.verl.workers import CuaActorRolloutRefWorker as W


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
