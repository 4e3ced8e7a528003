"""An episode writer SIGKILLed mid-episode leaves a readable run: every screenshot on disk is a whole PNG, every
complete step line is read, the cut-off episode is `unfinished` (never a result) and the viewer still renders."""

import json
import textwrap

import pytest
from PIL import Image

from verl_cua.envs.trajectory import (
    RESULT,
    TRAJECTORY,
    EpisodeWriter,
    read_index,
    read_run,
    step_record,
    write_index,
)
from verl_cua.testing.kill import kill_when
from verl_cua.viewer.report import build_report
from verl_cua.viewer.runs import load_run

# one finished episode, then one that plays until it is killed; noisy screenshots take long enough to encode and
# write that the kill often lands inside a screenshot's write
WRITER = textwrap.dedent(
    """
    import os, sys
    from PIL import Image
    from verl_cua.envs.trajectory import EpisodeWriter, step_record
    run = sys.argv[1]
    done = EpisodeWriter(os.path.join(run, "click-test", "seed-0"))
    done.screenshot(0, Image.new("RGB", (64, 48)))
    done.step(step_record(step=1, screenshot="step_000.png", valid=True, reward=1.0))
    done.finish({"status": "success", "score": 1.0, "steps": 1})
    cut = EpisodeWriter(os.path.join(run, "click-test", "seed-1"))
    for i in range(10**6):
        name = cut.screenshot(i, Image.frombytes("RGB", (320, 240), os.urandom(320 * 240 * 3)))
        cut.step(step_record(step=i + 1, screenshot=name, valid=True, reward=0.0, model_text="x" * 4000))
    """
)


def test_a_writer_killed_mid_episode_leaves_a_readable_run(tmp_path):
    run = tmp_path / "run"
    lines = run / "click-test" / "seed-1" / TRAJECTORY
    kill_when(WRITER, [str(run)], lambda: lines.exists() and lines.read_bytes().count(b"\n") >= 4, timeout=60)
    complete = lines.read_bytes().count(b"\n")
    assert complete >= 4
    for shot in (run / "click-test" / "seed-1").glob("step_*.png"):  # temporary files are hidden (`.step_...`)
        with Image.open(shot) as image:
            image.load()  # a torn PNG raises here
    _, episodes = read_run(run)
    assert sorted(episodes) == ["click-test/seed-0", "click-test/seed-1"]
    cut = episodes["click-test/seed-1"]
    assert cut.status == "unfinished" and len(cut.steps) == complete
    assert [s["step"] for s in cut.steps] == list(range(1, complete + 1))
    viewed = load_run(run)
    assert viewed.counts()["unfinished"] == 1 and viewed.success_rate() == 1.0  # the cut episode is not a result
    html = build_report([run], tmp_path / "report").read_text()
    assert "unfinished" in html and "seed-1" in html


def test_an_unreadable_result_shows_the_episode_as_unfinished(tmp_path, caplog):
    writer = EpisodeWriter(tmp_path / "run" / "a")
    writer.step(step_record(step=1, valid=True))
    writer.close()
    (tmp_path / "run" / "a" / RESULT).write_text('{"status": "succ')  # a writer without the atomic rename
    _, episodes = read_run(tmp_path / "run")
    assert episodes["a"].status == "unfinished" and len(episodes["a"].steps) == 1
    assert "unreadable" in caplog.text


def test_the_index_lists_exactly_its_episodes_and_rejects_paths_outside(tmp_path):
    for key in ("t/a", "t/b", "t/c"):
        EpisodeWriter(tmp_path / key).finish({"status": "failure", "steps": 0})
    assert sorted(read_run(tmp_path)[1]) == ["t/a", "t/b", "t/c"]  # no index: every episode directory
    write_index(tmp_path, ["t/b", "t/a", "t/gone"])
    assert read_index(tmp_path) == ["t/a", "t/b", "t/gone"]
    assert sorted(read_run(tmp_path)[1]) == ["t/a", "t/b"]  # listed and present
    with pytest.raises(ValueError, match="relative paths inside the run directory"):
        write_index(tmp_path, ["t/a", "../elsewhere"])
    (tmp_path / "episodes.json").write_text(json.dumps({"episodes": "t/a"}))
    assert read_index(tmp_path) is None and len(read_run(tmp_path)[1]) == 3  # a bad index: every directory
