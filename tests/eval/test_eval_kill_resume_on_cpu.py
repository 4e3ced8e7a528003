"""`verl-cua eval` SIGKILLed mid-episode (with its browser) and run again: the finished episode is kept as it was, the
cut-off one is played again from scratch, and summary.json counts each task exactly once."""

import json
import os
import signal
import subprocess
import sys
import time

from verl_cua.eval import EvalConfig, run_eval
from verl_cua.testing.chat_server import GatedChatServer, ScriptedChatServer
from verl_cua.testing.kill import group_gone, own_group

SCRIPT = {"Click": ["```python\npyautogui.click(5, 5)\n```", "DONE"]}  # a corner click: a failure, two turns


def _eval_args(out, url):
    run = ["--env", "miniwob", "--tasks", "click-test", "--seeds", "0-1", "--format", "pyautogui", "--max-steps", "3"]
    return ["eval", *run, "--model", "scripted", "--base-url", url, "--out", str(out), "--no-progress"]


def test_a_killed_eval_resumes_keeping_finished_episodes_and_redoing_the_cut_one(tmp_path, chromium):
    out = tmp_path / "run"
    gated = GatedChatServer(SCRIPT, hold=4)  # seed-0: requests 1-2; seed-1: 3 answered, 4 held (its second turn)
    cli = [sys.executable, "-c", "import sys; from verl_cua.cli import main; sys.exit(main())"]
    try:
        with own_group([*cli, *_eval_args(out, gated.url)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
            assert gated.held.wait(120), proc.stderr.read().decode()[-3000:] if proc.poll() is not None else "no 4th"
            os.killpg(proc.pid, signal.SIGKILL)  # the eval and its chromium/chromedriver, as a crash of the job would
            proc.wait()
            assert group_gone(proc.pid)  # no browser of the killed run is left behind
    finally:
        gated.release.set()
        gated.close()
    done, cut = out / "click-test" / "seed-0", out / "click-test" / "seed-1"
    finished = (done / "result.json").read_bytes()
    assert json.loads(finished)["status"] == "failure"
    assert not (cut / "result.json").exists() and len((cut / "trajectory.jsonl").read_text().splitlines()) == 1
    assert not (out / "summary.json").exists()
    time.sleep(0.05)  # a rewrite of seed-0's result would show in its mtime

    server = ScriptedChatServer(SCRIPT)
    try:
        summary = run_eval(EvalConfig(env="miniwob", tasks="click-test", seeds="0-1", model="scripted",
                                      format="pyautogui", out=str(out), base_url=server.url, max_steps=3))  # fmt: skip
    finally:
        server.close()
    assert len(server.requests) == 2  # only the cut-off episode is played again: two turns
    assert (done / "result.json").read_bytes() == finished
    redone = json.loads((cut / "result.json").read_text())
    assert redone["status"] == "failure" and redone["steps"] == 2 and redone["attempts"] == 1
    assert [json.loads(line)["step"] for line in (cut / "trajectory.jsonl").read_text().splitlines()] == [1, 2]
    assert (summary["tasks"], summary["scored"], summary["unfinished"], summary["infra_failures"]) == (2, 2, 0, 0)
    assert sorted(summary["results"]) == ["click-test/seed-0", "click-test/seed-1"]
    assert json.loads((out / "summary.json").read_text()) == summary
    assert json.loads((out / "run.json").read_text())["tasks"] == ["click-test/seed-0", "click-test/seed-1"]


def test_a_torn_result_counts_as_unfinished_not_as_a_result(tmp_path):
    from verl_cua.envs.trajectory import EpisodeWriter
    from verl_cua.eval.summary import summarise

    EpisodeWriter(tmp_path / "click-test" / "seed-0").finish({"status": "success", "steps": 1})
    EpisodeWriter(tmp_path / "click-test" / "seed-1").close()
    (tmp_path / "click-test" / "seed-1" / "result.json").write_text('{"status": "succ')  # not an atomic writer's
    summary = summarise(tmp_path)
    assert (summary["tasks"], summary["scored"], summary["successes"], summary["unfinished"]) == (2, 1, 1, 1)
