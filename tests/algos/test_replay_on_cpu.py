"""ARPO replay: which all-fail groups get a buffered success, and in which row."""

import math
import random

import pytest

from verl_cua.algos.replay import replay_episodes, replay_keys, replay_targets
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


def test_step_rows_replay_the_last_episode_of_an_all_fail_group():
    # group g: episodes a (2 step rows), b (3), c (1), all failed their task; group h: a success, no replay
    episodes = ["a", "a", "b", "b", "b", "c", "d", "e"]
    groups = ["g"] * 6 + ["h", "h"]
    scores = [0.0] * 6 + [1.0, 0.0]
    tasks = ["T1"] * 6 + ["T2", "T2"]
    targets = replay_episodes(episodes, groups, scores, tasks, make_buffer(), random.Random(0))
    assert list(targets) == ["c"]  # the group's last episode, whatever its row count
    assert targets["c"] in {"T1-success-1", "T1-success-2"}


def test_the_trigger_reads_task_scores_not_penalised_rewards():
    # ARPO's example: 7 failures and one failure with two invalid actions (reward -0.2, task score 0). On rewards the
    # population std is 0.066 >= 0.05 and the group would get nothing; on task scores it is all-fail.
    rewards = [0.0] * 7 + [-0.2]
    mean = sum(rewards) / 8
    assert math.sqrt(sum((r - mean) ** 2 for r in rewards) / 8) >= 0.05
    assert replay_targets(["g"] * 8, rewards, ["T1"] * 8, make_buffer(), random.Random(0)) == {}
    episodes = [f"e{i}" for i in range(8)]
    scores = [0.0] * 8
    assert list(replay_episodes(episodes, ["g"] * 8, scores, ["T1"] * 8, make_buffer(), random.Random(0))) == ["e7"]


def test_replay_keys_reuse_the_episode_keys_and_extend_or_drop():
    victim = ["u1_3_1", "u1_3_0"]
    assert replay_keys(victim, 4) == (["u1_3_0", "u1_3_1", "u1_3_2", "u1_3_3"], [])
    assert replay_keys(victim, 1) == (["u1_3_0"], ["u1_3_1"])
    assert replay_keys(["u_s_0"], 1) == (["u_s_0"], [])
    with pytest.raises(ValueError, match="more than one session"):
        replay_keys(["u_1_0", "u_2_0"], 1)
