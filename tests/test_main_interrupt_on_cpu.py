"""Ctrl-C stops the trainer (`python -m verl_cua.main`) in one line: where it stopped, the last checkpoint saved
(from verl's tracker under trainer.default_local_dir) or none yet, and the command that goes on from it; exit 130,
Ray shut down first so that no worker prints after it. For real (SIGINT to the whole process group of a CPU training,
once its first checkpoint is saved; no process of the run outlives it): the quickstart's test,
tests/recipes/test_learning_on_cpu.py, whose first run is stopped that way."""

import signal
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_cua import main as entry
from verl_cua.exits import INTERRUPTED

ROOT = Path(__file__).resolve().parents[1]


class FakeRay:
    """What `stop_ray` reads of a started Ray: it is up, and shuts down once."""

    def __init__(self, up: bool = True):
        self.up, self.shutdowns = up, 0

    def is_initialized(self) -> bool:
        return self.up

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.up = False


@pytest.fixture(autouse=True)
def _default_sigint():
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _config(tmp_path, **trainer):
    base = {"run": str(tmp_path), "save_freq": 1, "resume_mode": "auto", "default_local_dir": "${trainer.run}/ckpt"}
    return OmegaConf.create({"trainer": {**base, **trainer}})


def _interrupted(monkeypatch, config, ray):
    def run(_config):
        raise KeyboardInterrupt

    monkeypatch.setattr(entry, "run", run)
    monkeypatch.setitem(sys.modules, "ray", ray)
    with pytest.raises(SystemExit) as exc:
        entry.run_or_exit(config)
    return exc.value.code


def test_ctrl_c_in_training_shuts_ray_down_then_names_the_checkpoint(tmp_path, monkeypatch, capsys):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("2")
    ray = FakeRay()
    assert _interrupted(monkeypatch, _config(tmp_path), ray) == INTERRUPTED
    assert ray.shutdowns == 1
    assert capsys.readouterr().err.splitlines() == [
        f"verl-cua: stopped by Ctrl-C during training; last saved checkpoint: step 2 in {tmp_path}/ckpt; rerun the "
        "same command (trainer.resume_mode=auto resumes from it)"
    ]


def test_ctrl_c_before_ray_started_says_so_and_that_nothing_was_saved(tmp_path, monkeypatch, capsys):
    ray = FakeRay(up=False)
    config = _config(tmp_path, save_freq=-1, resume_mode="disable")
    assert _interrupted(monkeypatch, config, ray) == INTERRUPTED
    assert ray.shutdowns == 0
    assert capsys.readouterr().err.splitlines() == [
        "verl-cua: stopped by Ctrl-C before training started; no checkpoint saved yet (trainer.save_freq=-1 saves "
        "none); rerun the same command to start again"
    ]
