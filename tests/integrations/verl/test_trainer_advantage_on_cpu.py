"""The trainer's advantage step around verl's: infra-failed rows leave their GRPO group (siblings' advantages are
what they would be without them), and a uniformly scored group gets exactly zero GRPO advantage."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from verl.protocol import DataProto
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

from verl_cua.integrations.verl.rows.fields import infra_rows, isolate_infra_uids
from verl_cua.integrations.verl.rows.uniform_groups import settle_uniform_groups


def _data(scores, uids, rows_per_session=None, keys=None):
    """A padded batch with one scored row per session, or `rows_per_session` rows (reward on the last) per session;
    its keys are `keys` when given (one row per session), else `{uid}_{session}_{index}` numbered here."""
    L, per = 3, rows_per_session or 1
    n = len(scores) * per
    rewards = torch.zeros(n, L)
    rewards[per - 1 :: per, -1] = torch.tensor(scores, dtype=torch.float32)
    row_uids = [u for u in uids for _ in range(per)]
    if keys is None:
        keys, counters = [], {}
        for u in uids:
            session = counters[u] = counters.get(u, -1) + 1
            keys += [f"{u}_{session}_{i}" for i in range(per)]
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(n, L)},
        non_tensors={"uid": np.array(row_uids, dtype=object)},
    )
    return data, keys


def _advantages(scores, uids, estimator="grpo", rows_per_session=None, settle=True, keys=None):
    """verl's advantage step on `_data`, then (with `settle`) the trainer's uniform-group step: the first column of
    advantages and returns, and the metrics."""
    data, keys = _data(scores, uids, rows_per_session, keys)
    algo = OmegaConf.create({"adv_estimator": estimator, "norm_adv_by_std_in_grpo": True})
    data = compute_advantage_for_multi_trajectories(data, batch_keys=keys, adv_estimator=estimator, config=algo)
    metrics = settle_uniform_groups(data, keys, estimator) if settle else {}
    return data.batch["advantages"][:, 0].clone(), data.batch["returns"][:, 0].clone(), metrics


def _grpo(scores, uids, keys):
    """verl's multi-trajectory GRPO alone, one row per session with the given keys."""
    return _advantages(scores, uids, keys=keys, settle=False)[0]


def test_infra_row_does_not_shift_its_group():
    # group "a": rewards 1, 0, and an infra failure (reward 0); group "b": 1, 0
    scores = [1.0, 0.0, 0.0, 1.0, 0.0]
    uids = ["a", "a", "a", "b", "b"]
    keys = ["a_0_0", "a_1_0", "a_2_0", "b_0_0", "b_1_0"]
    extra = [{"cua_infra_failure": False}] * 2 + [{"cua_infra_failure": True}] + [{}, None]
    infra = infra_rows(extra)
    assert infra == [False, False, True, False, False]
    adv = _grpo(scores, isolate_infra_uids(uids, infra), keys)
    clean = _grpo([1.0, 0.0, 1.0, 0.0], ["a", "a", "b", "b"], ["a_0_0", "a_1_0", "b_0_0", "b_1_0"])
    assert adv[[0, 1, 3, 4]].tolist() == pytest.approx(clean.tolist())
    assert adv[2].item() == 0.0  # singleton group with reward 0; the trainer also multiplies it by 0
    naive = _grpo(scores, uids, keys)  # what counting the failure as an agent failure would do
    assert naive[0].item() != pytest.approx(clean[0].item())


def test_isolated_uids_are_unique_per_row():
    uids = isolate_infra_uids(["u", "u", "u"], [True, True, False])
    assert len(set(uids[:2])) == 2 and uids[2] == "u"


# -- uniformly scored groups -----------------------------------------------------------------------------------------


def test_verl_leaves_a_one_sided_residue_on_a_uniform_group_and_the_trainer_zeroes_it():
    # eight episodes that each made two invalid moves (-0.1 twice), beside a group that learned something
    scores, uids = [-0.2] * 8 + [1.0, -0.2, -0.2, -0.2], ["u"] * 8 + ["m"] * 4
    raw, _, _ = _advantages(scores, uids, settle=False)
    assert raw[:8].abs().min().item() > 0.01 and len(set(raw[:8].tolist())) == 1  # verl 0.9.1: +0.0147 on each
    adv, returns, metrics = _advantages(scores, uids)
    assert adv[:8].tolist() == [0.0] * 8 and returns[:8].tolist() == [0.0] * 8
    assert adv[8:].tolist() == raw[8:].tolist()  # a group with signal keeps verl's values bit for bit
    assert adv[8].item() > 0 > adv[9].item()
    assert metrics == {"cua/uniform_reward_groups": 0.5}


def test_a_session_of_several_outputs_is_judged_by_its_final_output():
    # three rows per session, reward on the last: verl broadcasts the final row's advantage to the session's rows
    adv, _, metrics = _advantages([-0.3] * 6, ["u"] * 6, rows_per_session=3)
    assert adv.tolist() == [0.0] * 18 and metrics["cua/uniform_reward_groups"] == 1.0
    adv, _, metrics = _advantages([-0.3] * 5 + [0.7], ["u"] * 6, rows_per_session=3)
    assert adv[-3:].gt(0).all() and adv[:15].lt(0).all() and metrics["cua/uniform_reward_groups"] == 0.0


def test_scores_that_differ_only_by_rounding_are_one_score():
    total = torch.zeros(())
    for _ in range(10):  # ten +0.1 rewards: 1.0 by another float32 road
        total = total + torch.tensor(0.1)
    a = float(total)
    assert a != 1.0
    raw, _, _ = _advantages([a, 1.0, 1.0, a], ["u"] * 4, settle=False)
    assert raw.abs().max().item() > 0.05  # verl: one ulp over (std + 1e-6)
    adv, _, metrics = _advantages([a, 1.0, 1.0, a], ["u"] * 4)
    assert adv.tolist() == [0.0] * 4 and metrics["cua/uniform_reward_groups"] == 1.0


def test_singletons_and_isolated_infra_rows_are_not_groups():
    uids = isolate_infra_uids(["u", "u", "u", "s"], [False, False, True, False])
    adv, _, metrics = _advantages([-0.1, -0.1, 0.0, 0.5], uids)
    assert adv[:2].tolist() == [0.0, 0.0]
    assert metrics == {"cua/uniform_reward_groups": 1.0}  # one group of two; the infra row and "s" are singletons


def test_other_estimators_keep_verls_advantages_and_still_report_uniform_groups():
    scores, uids = [-0.2] * 8 + [1.0, 0.0], ["u"] * 8 + ["m"] * 2
    raw, _, _ = _advantages(scores, uids, estimator="rloo", settle=False)
    adv, _, metrics = _advantages(scores, uids, estimator="rloo")
    assert adv.tolist() == raw.tolist() and metrics == {"cua/uniform_reward_groups": 0.5}


@settings(deadline=None, max_examples=80)
@given(
    groups=st.lists(
        st.tuples(
            st.integers(2, 16), st.floats(-3, 3, allow_nan=False, width=32), st.booleans(), st.integers(0, 2**16)
        ),
        min_size=1,
        max_size=6,
    )
)
def test_uniform_groups_get_exactly_zero_and_groups_with_signal_keep_verls_values(groups):
    scores, uids = [], []
    for g, (size, value, uniform, seed) in enumerate(groups):
        spread = [0.0] * size if uniform else torch.randn(size, generator=torch.Generator().manual_seed(seed)).tolist()
        scores += [value + s for s in spread]
        uids += [f"g{g}"] * size
    raw, _, _ = _advantages(scores, uids, settle=False)
    adv, _, metrics = _advantages(scores, uids)
    expected = 0
    for g, (size, _value, uniform, _seed) in enumerate(groups):
        rows = [i for i, u in enumerate(uids) if u == f"g{g}"]
        if uniform:
            expected += 1
            assert adv[rows].tolist() == [0.0] * size
        else:
            assert adv[rows].tolist() == raw[rows].tolist()
            assert abs(adv[rows].sum().item()) < 1e-3
    assert metrics["cua/uniform_reward_groups"] == expected / len(groups)
