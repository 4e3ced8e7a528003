"""SuccessBuffer: per-task FIFO with key dedup, sampling, checkpoints; trajectory_key."""

import hashlib
import pickle
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verl_cua.algos.success_buffer import SuccessBuffer, trajectory_key


def test_fifo_per_task_and_dedup_moves_to_newest():
    buf = SuccessBuffer(per_task=3)
    assert buf.add("t", "k1", 1) and buf.add("t", "k2", 2) and buf.add("t", "k3", 3)
    assert buf.add("t", "k1", 10) is False  # replaced and moved to newest
    assert buf.get("t") == [2, 3, 10]
    assert buf.add("t", "k4", 4) is True  # evicts the oldest (k2)
    assert buf.get("t") == [3, 10, 4]
    assert buf.add("u", "k1", "other task") is True  # keys are per task
    assert len(buf) == 4 and buf.tasks() == ["t", "u"]
    assert buf.get("missing") == []


def test_sample_without_replacement():
    buf = SuccessBuffer(per_task=5)
    for i in range(4):
        buf.add("t", i, i)
    rng = random.Random(0)
    picked = buf.sample("t", 3, rng)
    assert len(picked) == 3 and len(set(picked)) == 3 and set(picked) <= {0, 1, 2, 3}
    assert sorted(buf.sample("t", 10, rng)) == [0, 1, 2, 3]
    assert buf.sample("t", 0, rng) == [] and buf.sample("none", 2, rng) == []


def test_sample_all_is_stratified():
    buf = SuccessBuffer(per_task=8)
    for task, count in (("b", 3), ("a", 1), ("c", 2)):
        for i in range(count):
            buf.add(task, i, (task, i))
    rng = random.Random(1)
    # first pass takes one of each task in sorted order a, b, c; then b, c again
    picked = buf.sample_all(5, rng)
    assert [task for task, _ in picked[:3]] == ["a", "b", "c"]
    assert Counter(task for task, _ in picked) == {"a": 1, "b": 2, "c": 2}
    assert len(set(picked)) == 5
    everything = buf.sample_all(100, rng)
    assert sorted(everything) == sorted([("a", 0), ("b", 0), ("b", 1), ("b", 2), ("c", 0), ("c", 1)])
    assert buf.sample_all(0, rng) == [] and SuccessBuffer().sample_all(3, rng) == []


def test_state_dict_round_trip_is_plain_and_picklable():
    buf = SuccessBuffer(per_task=2)
    buf.add("t", "a", {"actions": ["click(1, 2)"]})
    buf.add("t", "b", {"actions": ["wait()"]})
    buf.add("u", ("tuple", 1), [1, 2])
    state = pickle.loads(pickle.dumps(buf.state_dict()))
    assert state == {
        "per_task": 2,
        "tasks": {
            "t": [["a", {"actions": ["click(1, 2)"]}], ["b", {"actions": ["wait()"]}]],
            "u": [[("tuple", 1), [1, 2]]],
        },
    }
    other = SuccessBuffer(per_task=2)
    other.load_state_dict(state)
    assert other.state_dict() == buf.state_dict()
    assert other.add("t", "a", "again") is False  # keys survive the round trip
    smaller = SuccessBuffer(per_task=1)
    smaller.load_state_dict(state)
    assert smaller.get("t") == [{"actions": ["wait()"]}]  # the newest is kept


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_bad_per_task(bad):
    with pytest.raises(ValueError, match="per_task"):
        SuccessBuffer(per_task=bad)


@given(
    per_task=st.integers(1, 4),
    ops=st.lists(st.tuples(st.sampled_from(["t", "u", "v"]), st.integers(0, 6), st.integers()), max_size=60),
)
def test_capacity_and_unique_keys_invariants(per_task, ops):
    buf = SuccessBuffer(per_task=per_task)
    model: dict[str, list[tuple[int, int]]] = {}
    for task, key, item in ops:
        entries = model.setdefault(task, [])
        is_new = all(k != key for k, _ in entries)
        assert buf.add(task, key, item) is is_new
        entries[:] = [(k, v) for k, v in entries if k != key] + [(key, item)]
        del entries[:-per_task]
        for name in buf.tasks():
            keys = [k for k, _ in buf.state_dict()["tasks"][name]]
            assert len(keys) <= per_task and len(keys) == len(set(keys))
    for task, entries in model.items():
        assert buf.get(task) == [v for _, v in entries]
    assert len(buf) == sum(len(e) for e in model.values())


def test_trajectory_key_normalizes_whitespace():
    assert trajectory_key(["click(1,  2)", " type('a')\n"]) == trajectory_key(["click(1, 2)", "type('a')"])
    assert trajectory_key(["a", "b"]) != trajectory_key(["a b"])
    assert trajectory_key(["click(1, 2)", "wait()"]) == hashlib.sha1(b"click(1, 2)\nwait()").hexdigest()
