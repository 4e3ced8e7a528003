"""ARPO replay: which all-fail groups get a buffered success, and in which row."""

import random

import pytest

from verl_cua.algos.replay import replay_targets
from verl_cua.algos.success_buffer import SuccessBuffer


def make_buffer() -> SuccessBuffer:
    """Buffer with two successes for task T1 and one for T2."""
    buf = SuccessBuffer(per_task=4)
    buf.add("T1", "k1", "T1-success-1")
    buf.add("T1", "k2", "T1-success-2")
    buf.add("T2", "k1", "T2-success")
    return buf


def test_replaces_last_row_of_all_fail_groups_only():
    groups = ["g1", "g2", "g1", "g2", "g3", "g3", "g4", "g4", "g5"]
    tasks = ["T1", "T2", "T1", "T2", "T2", "T2", "T3", "T3", "T1"]
    rewards = [
        0.0,  # g1 (T1): [0, 0.08] -> mean 0.04, population std 0.04 < 0.05 -> replay at row 2
        0.0,  # g2 (T2): [0, 1] -> std 0.5, has a success -> no replay
        0.08,
        1.0,
        0.3,  # g3 (T2): [0.3, 0.3] -> std 0 but mean 0.3 >= 0.2 -> no replay
        0.3,
        0.0,  # g4 (T3): all fail, but T3 has nothing buffered -> no replay
        0.0,
        0.0,  # g5: a single row -> skipped
    ]
    targets = replay_targets(groups, rewards, tasks, make_buffer(), random.Random(0))
    assert list(targets) == [2]
    assert targets[2] in {"T1-success-1", "T1-success-2"}


def test_population_std_not_sample_std():
    # [0, 0.08]: population std 0.04 (< 0.05), sample std 0.0566 (would not be < 0.05)
    targets = replay_targets(["g", "g"], [0.0, 0.08], ["T2", "T2"], make_buffer(), random.Random(0))
    assert targets == {1: "T2-success"}
    # custom thresholds: std must be < 0.01 now
    assert replay_targets(["g", "g"], [0.0, 0.08], ["T2", "T2"], make_buffer(), random.Random(0), 0.01) == {}
    # mean threshold: [0.5, 0.5] passes with mean_threshold 0.6
    targets = replay_targets(["g", "g"], [0.5, 0.5], ["T2", "T2"], make_buffer(), random.Random(0), 0.05, 0.6)
    assert targets == {1: "T2-success"}


def test_sampling_is_seeded_and_random():
    groups, rewards, tasks = ["g"] * 3, [0.0] * 3, ["T1"] * 3
    a = replay_targets(groups, rewards, tasks, make_buffer(), random.Random(5))
    b = replay_targets(groups, rewards, tasks, make_buffer(), random.Random(5))
    assert a == b
    seen = {replay_targets(groups, rewards, tasks, make_buffer(), random.Random(s))[2] for s in range(30)}
    assert seen == {"T1-success-1", "T1-success-2"}


def test_length_mismatch():
    with pytest.raises(ValueError, match="lengths differ"):
        replay_targets(["g"], [0.0, 0.0], ["T1"], make_buffer(), random.Random(0))
