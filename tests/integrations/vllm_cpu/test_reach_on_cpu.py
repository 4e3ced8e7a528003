"""The sync check's verdict: an engine reached the update when it matches the trainer's forward of the new weights
and moved from its start; a repeat's run-to-run noise (about 5e-7 nats) is not a move."""

from verl_cua.integrations.vllm_cpu import SYNC_TOLERANCE
from verl_cua.integrations.vllm_cpu.reach import compare, moved, weights_reached

BEFORE = [{"tokens": [5, 6, 7], "logprobs": [-1.0, -2.0, -3.0]}]


def _out(tokens, logprobs):
    return [{"tokens": tokens, "logprobs": logprobs}]


def test_a_repeat_with_float_noise_has_not_moved_and_a_real_change_has():
    assert not moved(BEFORE, _out([5, 6, 7], [-1.0, -2.0000005, -3.0]))
    assert moved(BEFORE, _out([5, 6, 7], [-1.0, -2.2, -3.0]))
    assert moved(BEFORE, _out([5, 9, 7], [-1.0, -2.0, -3.0]))  # same log-probs, another token


def test_reached_needs_the_trainers_tokens_a_small_gap_and_a_move():
    after = _out([5, 6, 8], [-0.5, -1.5, -2.5])
    trainer = [{"greedy": [5, 6, 8], "logprobs": [-0.5, -1.5, -2.5000004]}]
    vs = compare(after, trainer)
    assert vs == {"same_tokens": True, "max_logprob_gap": vs["max_logprob_gap"]} and vs["max_logprob_gap"] < 1e-6
    assert weights_reached(BEFORE, after, vs)
    assert not weights_reached(after, after, vs)  # matches, but never moved: the engine already had these weights
    far = compare(after, [{"greedy": [5, 6, 8], "logprobs": [-0.5, -1.5, -2.5 + 10 * SYNC_TOLERANCE]}])
    assert not weights_reached(BEFORE, after, far)
    other = compare(after, [{"greedy": [5, 6, 9], "logprobs": [-0.5, -1.5, -2.5]}])
    assert not other["same_tokens"] and not weights_reached(BEFORE, after, other)
