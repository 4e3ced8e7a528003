"""group_normalize: GRPO's group-relative advantage, hand-computed values and invariants."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_cua.algos.grouping import group_normalize


def test_one_group_matches_hand_computed_grpo():
    # rewards [1, 0, 0, 1]: mean 0.5; unbiased var = 4 * 0.25 / 3 = 1/3, std = 0.57735;
    # (1 - 0.5) / 0.57735 = 0.86603 and (0 - 0.5) / 0.57735 = -0.86603.
    out = group_normalize(torch.tensor([1.0, 0.0, 0.0, 1.0]), ["t"] * 4)
    assert out.tolist() == pytest.approx([0.86603, -0.86603, -0.86603, 0.86603], abs=1e-4)


def test_several_groups_singleton_and_mean_only():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 3.0])
    groups = ["a", "a", "b", "b", "c"]
    # group a = [1, 0]: mean 0.5, unbiased std = sqrt(0.5 / 1) = 0.70711, so +-0.5 / 0.70711 = +-0.70711;
    # group b = [0, 1] mirrors it; c is a singleton, so 0.
    out = group_normalize(scores, groups)
    assert out.tolist() == pytest.approx([0.70711, -0.70711, -0.70711, 0.70711, 0.0], abs=1e-4)
    # without std: just x - mean.
    out = group_normalize(scores, groups, norm_by_std=False)
    assert out.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.0], abs=1e-6)


def test_interleaved_groups_and_integer_scores():
    # rows 0 and 2 form group x = [2, 4] (mean 3), rows 1 and 3 group y = [5, 5] (std 0: 0 / (0 + eps) = 0).
    out = group_normalize(torch.tensor([2, 5, 4, 5]), ["x", "y", "x", "y"], norm_by_std=False)
    assert out.dtype == torch.float32
    assert out.tolist() == pytest.approx([-1.0, 0.0, 1.0, 0.0])
    out = group_normalize(torch.tensor([2.0, 5.0, 4.0, 5.0]), ["x", "y", "x", "y"])
    # x: unbiased std = sqrt(2 / 1) = 1.41421, so -+1 / 1.41421 = -+0.70711.
    assert out.tolist() == pytest.approx([-0.70711, 0.0, 0.70711, 0.0], abs=1e-4)


@pytest.mark.parametrize("value", [-0.1, -0.2, -0.3, 0.7, 1.1])
@pytest.mark.parametrize("size", [2, 5, 8, 16])
def test_a_uniform_float32_group_gives_exactly_zero(value, size):
    # float32 torch.mean of 8 x -0.2 is one ulp off -0.2, which (x - mean) / (std + eps) turns into +0.0147 each
    out = group_normalize(torch.full((size,), value, dtype=torch.float32), ["g"] * size)
    assert out.dtype == torch.float32 and out.tolist() == [0.0] * size


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="one group id per row"):
        group_normalize(torch.zeros(3), ["a", "b"])
    with pytest.raises(ValueError):
        group_normalize(torch.zeros(2, 2), ["a", "b"])


@settings(deadline=None, max_examples=60)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 4), st.floats(-10, 10, allow_nan=False, allow_infinity=False)), min_size=1, max_size=20
    ),
    norm_by_std=st.booleans(),
)
def test_zero_mean_per_group_and_singletons_zero(rows, norm_by_std):
    groups = [g for g, _ in rows]
    scores = torch.tensor([s for _, s in rows], dtype=torch.float64)
    out = group_normalize(scores, groups, norm_by_std=norm_by_std)
    for group in set(groups):
        members = [i for i, g in enumerate(groups) if g == group]
        values = out[members]
        if len(members) == 1:
            assert values.item() == 0.0
        else:
            assert abs(values.mean().item()) < 1e-6
            if norm_by_std:
                # each entry is a z-score against the unbiased std: |z| <= (n - 1) / sqrt(n)
                bound = (len(members) - 1) / len(members) ** 0.5
                assert values.abs().max().item() <= bound + 1e-6
