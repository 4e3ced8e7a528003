"""A training trace step written twice (killed, resumed, re-run): the viewer shows each episode of the step once, the
complete attempt's; before any attempt is indexed the cut-off episodes are `unfinished`, never results."""

import torch

from verl_cua.envs.trajectory import INDEX, EpisodeWriter, step_record
from verl_cua.integrations.verl.trace.episodes import write_advantages
from verl_cua.viewer.runs import load_run


def _attempt(step_dir, uid, finished, cut=0):
    """One attempt at a training step: `finished` complete episodes and `cut` ones killed mid-play; its extra rows."""
    rows = []
    for i in range(finished + cut):
        writer = EpisodeWriter(step_dir / "click-test-seed0" / f"{uid}-{i}")
        writer.step(step_record(step=1, valid=True, reward=float(i == 0)))
        if i < finished:
            writer.finish({"status": "success" if i == 0 else "failure", "steps": 1, "reward": float(i == 0)})
            rows.append({"cua_trace_dir": str(writer.dir)})
        else:
            writer.close()
    return rows


def _advantages(rows):
    ones = torch.ones(len(rows), 2)
    assert write_advantages(rows, ones, ones) == len(rows)


def test_a_step_written_twice_shows_each_episode_once(tmp_path):
    step = tmp_path / "trace" / "step_000003"
    _attempt(step, "aaaa1111", finished=2, cut=2)  # killed mid-rollout: no advantages, no index
    run = load_run(step)
    assert run.counts() == {"tasks": 4, "success": 1, "failure": 1, "infra_failure": 0, "unfinished": 2, "scored": 2}
    assert not (step / INDEX).exists()
    second = _attempt(step, "bbbb2222", finished=4)  # the re-run after the resume
    _advantages(second)
    run = load_run(step)
    assert sorted(run.episodes) == [f"click-test-seed0/bbbb2222-{i}" for i in range(4)]
    assert run.counts()["tasks"] == 4 and run.counts()["unfinished"] == 0
    assert all(e.result["step_advantages"] == [1.0] for e in run.episodes.values())
    _attempt(step, "cccc3333", finished=1, cut=1)  # a third attempt killed before its advantages
    assert sorted(load_run(step).episodes) == sorted(run.episodes)  # still the indexed attempt's episodes


def test_the_whole_trace_directory_shows_each_step_once(tmp_path):
    trace = tmp_path / "trace"
    _advantages(_attempt(trace / "step_000001", "aaaa1111", finished=2))
    _attempt(trace / "step_000002", "bbbb1111", finished=2)  # killed run: step 2 never indexed ...
    _advantages(_attempt(trace / "step_000002", "bbbb2222", finished=2))  # ... re-run and indexed
    _attempt(trace / "val_step_000002", "cccc1111", finished=1, cut=1)  # validation: no index, cut one unfinished
    _attempt(trace / ".abandoned" / "resumed-at-2" / "step_000003", "dddd1111", finished=2)  # set aside by a resume
    run = load_run(trace)
    assert sorted(run.episodes) == [
        *(f"step_000001/click-test-seed0/aaaa1111-{i}" for i in range(2)),
        *(f"step_000002/click-test-seed0/bbbb2222-{i}" for i in range(2)),
        *(f"val_step_000002/click-test-seed0/cccc1111-{i}" for i in range(2)),
    ]
    assert run.counts()["unfinished"] == 1 and run.counts()["scored"] == 5
