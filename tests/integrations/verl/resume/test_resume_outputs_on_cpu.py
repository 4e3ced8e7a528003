"""A resumed run's outputs: verl's own Tracking (file backend) keeps the metric records of the steps the checkpoint
holds instead of truncating them, a kill during that resume loses nothing, and traces of steps lost with the crash
move aside."""

import json

from verl.utils.tracking import Tracking

from verl_cua.integrations.verl.resume.outputs import (
    ABANDONED_DIR,
    BACKUP_SUFFIX,
    keep_metrics_through,
    lines_through,
    set_aside_trace_steps,
)


def _crashed_run(path, steps: int = 4) -> None:
    """What a run killed in step `steps` + 1 leaves: validation at 0, steps 1..steps, a cut-off last line."""
    lines = [json.dumps({"step": 0, "data": {"val/acc": 0.1}})]
    lines += [json.dumps({"step": s, "data": {"cua/success_rate": s / 10}}) for s in range(1, steps + 1)]
    path.write_text("\n".join(lines) + "\n" + '{"step": 5, "data": {"cua/succ')


def _tracking() -> Tracking:
    return Tracking(project_name="p", experiment_name="e", default_backend=["file"], config={})


def test_verls_file_logger_keeps_the_checkpointed_steps_on_resume(tmp_path, monkeypatch):
    log = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    _crashed_run(log)
    with keep_metrics_through(3):  # the checkpoint holds step 3; step 4 was logged, then lost with the crash
        tracking = _tracking()
    tracking.log({"val/acc": 0.3}, step=3)  # verl validates again at the resumed step
    tracking.log({"cua/success_rate": 0.44}, step=4)  # and re-runs step 4
    tracking.logger["file"].finish()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1, 2, 3, 3, 4]
    assert [r["data"].get("cua/success_rate") for r in records if r["step"] == 4] == [0.44]
    assert not log.with_name(log.name + BACKUP_SUFFIX).exists()


def test_a_fresh_start_is_verls_own_truncating_logger(tmp_path, monkeypatch):
    log = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    _crashed_run(log)
    with keep_metrics_through(0):
        tracking = _tracking()
    tracking.log({"x": 1}, step=1)
    tracking.logger["file"].finish()
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1]


def test_a_kill_during_the_resume_loses_no_record(tmp_path, monkeypatch):
    """The old records wait in a backup until they are written back; a second resume reads them from there."""
    log = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    _crashed_run(log)
    backup = log.with_name(log.name + BACKUP_SUFFIX)
    log.rename(backup)
    log.write_text("")  # killed right after verl's logger truncated the new file
    with keep_metrics_through(4):
        tracking = _tracking()
    tracking.logger["file"].finish()
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [0, 1, 2, 3, 4]
    assert not backup.exists()


def test_default_file_logger_path_is_followed(tmp_path, monkeypatch):
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    (tmp_path / "p").mkdir()
    _crashed_run(tmp_path / "p" / "e.jsonl")
    with keep_metrics_through(2):
        tracking = _tracking()
    tracking.logger["file"].finish()
    assert len(lines_through(tmp_path / "p" / "e.jsonl", 10)) == 3


def test_trace_steps_after_the_checkpoint_move_aside(tmp_path):
    for step in (1, 2, 3, 4):
        (tmp_path / f"step_{step:06d}" / "ep").mkdir(parents=True)
        (tmp_path / f"val_step_{step:06d}" / "ep").mkdir(parents=True)
    moved = set_aside_trace_steps(str(tmp_path), 2, validates_at_start=True)  # verl validates again at step 2
    assert sorted(p.name for p in moved) == ["step_000003", "step_000004", *(f"val_step_00000{i}" for i in (2, 3, 4))]
    assert sorted(p.name for p in tmp_path.glob("*step_*")) == ["step_000001", "step_000002", "val_step_000001"]
    (kept,) = (tmp_path / ABANDONED_DIR).iterdir()
    assert len(list(kept.iterdir())) == 5
    assert set_aside_trace_steps(str(tmp_path), 2) == [] and set_aside_trace_steps(None, 2) == []
    (tmp_path / "val_step_000003").mkdir()
    assert [p.name for p in set_aside_trace_steps(str(tmp_path), 2)] == ["val_step_000003"]  # no validation at start
