"""`trainer.total_training_steps` is never cut short by `trainer.total_epochs` (verl 0.9.1 stops at the epochs' end
without a word; the learning test runs the real trainer with total_epochs=1 and counts its steps), and the replay
buffer's poll is short."""

import pytest

from verl_cua.integrations.verl.trainer import epochs_for_steps


@pytest.mark.parametrize(
    ("steps", "per_epoch", "epochs", "expected"),
    [
        (60, 1, 30, 60),  # the tiny recipe's case: 2 rows, batch 2, 60 steps asked, 30 given
        (60, 16, 1, 4),  # 60 steps of 16 per epoch: 4 epochs, the last one partly
        (64, 16, 1, 4),
        (10, 16, 1, 1),  # fits: unchanged
        (10, 16, 5, 5),  # more epochs than needed: left as the user set them
        (None, 16, 3, 3),  # no step count: epochs rule
        (-1, 16, 3, 3),
        (5, 0, 3, 3),  # an empty loader: nothing to raise
    ],
)
def test_epochs_cover_the_steps_asked_for(steps, per_epoch, epochs, expected):
    assert epochs_for_steps(steps, per_epoch, epochs) == expected


def test_cpu_runs_look_for_finished_rollouts_every_tenth_of_a_second(monkeypatch):
    # verl's sync buffer polls TransferQueue every 2 s (no config key reaches it): every rollout phase lasted a whole
    # number of 2-second ticks. On the CPU the trainer lowers it; GPU runs and a faster custom sampler keep theirs.
    from types import SimpleNamespace

    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1 import replay_buffer
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from verl_cua.integrations.verl.trainer import SAMPLE_POLL_S, CuaTrainer

    def real_buffer(self):  # verl's own sync buffer: a renamed attribute would fail here, not pass silently
        return replay_buffer.ReplayBuffer("sync", OmegaConf.create({}), None, "drop", OmegaConf.create({}))

    slept = []
    monkeypatch.setattr(replay_buffer.time, "sleep", slept.append)
    monkeypatch.setattr(PPOTrainerSync, "_build_replay_buffer", real_buffer)
    for device, want in (("cpu", SAMPLE_POLL_S), ("cuda", 2.0)):
        trainer = object.__new__(CuaTrainer)
        trainer.config = OmegaConf.create({"trainer": {"device": device}})
        buffer = CuaTrainer._build_replay_buffer(trainer)
        buffer._wait_for_next_poll("train", last_debug_time=0.0)
        assert slept.pop() == want
    faster = SimpleNamespace(poll_interval=0.01)
    monkeypatch.setattr(PPOTrainerSync, "_build_replay_buffer", lambda self: faster)
    trainer.config = OmegaConf.create({"trainer": {"device": "cpu"}})
    assert CuaTrainer._build_replay_buffer(trainer).poll_interval == 0.01
