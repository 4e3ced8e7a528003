"""`verl-cua eval` end to end: a scripted OpenAI-compatible server drives Qwen3-VL-format tool calls on the real local
OSWorld desktop, scored by OSWorld's own evaluators; one task is scripted to succeed and one to fail."""

import json

import pytest
from PIL import Image

from verl_cua.cli import main
from verl_cua.eval.images import model_image_size
from verl_cua.testing.chat_server import ScriptedChatServer, request_images
from verl_cua.testing.osworld_api_solutions import API_SOLUTIONS


def _call(arguments: dict, thought: str = "") -> str:
    return f'{thought}\n<tool_call>\n{{"name": "computer_use", "arguments": {json.dumps(arguments)}}}\n</tool_call>'


SCRIPTS = {
    # term-create-file: the right command, then terminate -> OSWorld's exact_match gives 1
    "hello.txt": [
        _call({"action": "type", "text": "echo hello world > ~/hello.txt\n"}, "The terminal has focus; I type."),
        _call({"action": "terminate", "status": "success"}),
    ],
    # files-make-dirs: only half the folders, an unparseable answer, then a false claim of success -> 0
    "projects/website": [
        _call({"action": "type", "text": "mkdir -p ~/projects/website\n"}, "Make the folder."),
        "I think the task is done, no tool call here.",
        _call({"action": "terminate", "status": "success"}),
    ],
}
TASKS = "term-create-file,files-make-dirs"


def _eval(server, out, *extra):
    return main(
        ["eval", "--env", "osworld", "--provider", "local", "--tasks", TASKS, "--model", "scripted-qwen3vl",
         "--base-url", server.url, "--format", "qwen3vl", "--history-images", "2", "--max-steps", "5",
         "--workers", "1", "--no-progress", "--out", str(out), *extra]
    )  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory, local_desktop):
    """One eval run over the two tasks (the desktop boots once for both)."""
    server = ScriptedChatServer(SCRIPTS)
    out = tmp_path_factory.mktemp("eval") / "qwen3vl-run"
    rc = _eval(server, out)
    yield rc, server, out
    server.close()


def test_summary_counts_one_success_of_two(run):
    rc, _server, out = run
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["successes"], summary["scored"], summary["success_rate"]) == (1, 2, 0.5)
    assert summary["infra_failures"] == 0 and summary["unfinished"] == 0
    assert summary["success_rate_ci95"] == pytest.approx([0.0945, 0.9055], abs=1e-4)  # Wilson, 1 of 2
    assert summary["success_rate_osworld"] == 0.5
    assert summary["domains"]["terminal"]["successes"] == 1 and summary["domains"]["terminal"]["tasks"] == 2
    # 5 model turns, one of them not an action
    assert summary["invalid_action_rate"] == pytest.approx(1 / 5)
    assert summary["mean_steps"] == pytest.approx(2.5)
    assert summary["prompt_tokens"] == 1000 + 1001 + 1000 + 1001 + 1002 and summary["completion_tokens"] == 5 * 20
    assert summary["results"]["terminal/term-create-file"]["status"] == "success"
    assert summary["results"]["terminal/files-make-dirs"]["status"] == "failure"


def test_trajectories_and_screenshots_are_written(run):
    _rc, _server, out = run
    ok = out / "terminal" / "term-create-file"
    steps = [json.loads(line) for line in (ok / "trajectory.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    first = steps[0]
    assert first["valid"] and first["action"]["actions"][0] == {**first["action"]["actions"][0], "kind": "type"}
    assert first["action"]["thought"] == "The terminal has focus; I type."
    assert first["screenshot"] == "step_000.png" and first["screen"] == [1920, 1080]
    assert first["usage"] == {"prompt_tokens": 1000, "completion_tokens": 20}
    assert first["timing"]["model_s"] > 0 and first["timing"]["env_s"] > 0
    assert first["response"]["choices"][0]["message"]["content"] == first["model_text"]
    for name in ("step_000.png", "step_001.png", "step_002.png"):
        with Image.open(ok / name) as image:
            assert image.size == (1920, 1080)
    result = json.loads((ok / "result.json").read_text())
    assert result["status"] == "success" and result["score"] == 1.0 and result["end_reason"] == "done"
    assert result["final_screenshot"] == "step_002.png" and result["attempts"] == 1
    assert "hello.txt" in result["instruction"]

    bad = out / "terminal" / "files-make-dirs"
    steps = [json.loads(line) for line in (bad / "trajectory.jsonl").read_text().splitlines()]
    assert [s["valid"] for s in steps] == [True, False, True]
    assert steps[1]["error"] and steps[2]["screenshot"] == "step_001.png"  # the invalid step changed nothing
    result = json.loads((bad / "result.json").read_text())
    assert (result["status"], result["score"], result["invalid_actions"]) == ("failure", 0.0, 1)


def test_requests_carry_the_prompt_and_at_most_k_screenshots(run):
    _rc, server, _out = run
    assert len(server.requests) == 5
    assert model_image_size("qwen3vl", (1920, 1080)) == (1920, 1088)  # a resize the server makes itself
    size = (1920, 1080)  # so the screenshot goes as it is
    for req in server.requests:
        body = req["body"]
        assert body["model"] == "scripted-qwen3vl" and body["temperature"] == 0.0
        assert body["messages"][0]["role"] == "system" and "computer_use" in body["messages"][0]["content"]
        images = request_images(body)
        assert 1 <= len(images) <= 2 and all(image.size == size for image in images)
    third = server.requests[4]["body"]["messages"]  # files-make-dirs, turn 3: three screenshots, the oldest omitted
    texts = [p["text"] for m in third if m["role"] == "user" for p in m["content"] if p["type"] == "text"]
    assert "(older screenshot omitted)" in texts
    assert any("not a valid action" in t for t in texts)  # the model is told its last output was invalid


def test_rerun_skips_finished_tasks_and_prints_the_table(run, monkeypatch, capsys):
    rc, server, out = run
    before = {p: p.stat().st_mtime_ns for p in out.rglob("result.json")}
    requests = len(server.requests)

    def no_desktop(*args, **kwargs):
        raise AssertionError("a rerun with nothing left to do must not start a desktop")

    monkeypatch.setattr("verl_cua.eval.runner.make_env", no_desktop)
    assert _eval(server, out) == 0
    printed = capsys.readouterr().out
    assert "terminal" in printed and "1/2" in printed and "50.0%" in printed
    assert len(server.requests) == requests
    assert {p: p.stat().st_mtime_ns for p in out.rglob("result.json")} == before
    assert json.loads((out / "summary.json").read_text())["successes"] == 1


def test_resuming_with_another_model_is_refused(run, capsys):
    _rc, server, out = run
    rc = main(
        ["eval", "--env", "osworld", "--tasks", TASKS, "--model", "other-model", "--base-url", server.url,
         "--format", "qwen3vl", "--history-images", "2", "--max-steps", "5", "--no-progress", "--out", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "model='scripted-qwen3vl'" in err and "another --out" in err and "\n" not in err


def test_an_api_gui_agent_solves_an_office_task_through_the_eval_harness(tmp_path, local_desktop, chat_server):
    """`verl-cua eval --format api_gui`: a scripted model sums a column with one app-API call and saves with another;
    OSWorld's evaluator scores it; each turn's prompt names the focused app, lists Calc's APIs and shows the last API
    result; the trajectory records both and the API call as an `api` action."""
    first, *rest = API_SOLUTIONS["calc-sum-column"]  # set B7's formula, save
    replies = ["<think>B7 holds the total.</think>\n" + first, *rest, "```python\nAgent.exit(success=True)\n```"]
    server = chat_server({"B7": replies})
    out = tmp_path / "api-run"
    rc = main(["eval", "--env", "osworld", "--provider", "local", "--tasks", "calc-sum-column", "--model", "scripted",
               "--base-url", server.url, "--format", "api_gui", "--max-steps", "5", "--workers", "1", "--no-progress",
               "--out", str(out)])  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["successes"], summary["scored"], summary["mean_steps"]) == (1, 1, 3)
    (trajectory,) = out.glob("*/calc-sum-column/trajectory.jsonl")
    steps = [json.loads(line) for line in trajectory.read_text().splitlines()]
    assert steps[0]["action"]["actions"][0]["api"] == "CalcTools.set_cell_value"
    assert steps[0]["api_result"] == "B7 = 99.5" and steps[1]["api_result"].startswith("saved ~/Documents/expenses")
    assert [s["focused_app"] for s in steps] == ["libreoffice_calc"] * 3
    texts = [p["text"] for r in server.requests for m in r["body"]["messages"] if m["role"] == "user"
             for p in m["content"] if p["type"] == "text"]  # fmt: skip
    assert "Focused app: libreoffice_calc." in texts[0] and "CalcTools.set_cell_value(cell: cell" in texts[0]
    assert any(t.endswith("Result of your last API call: B7 = 99.5") for t in texts)  # the turn after the first call
    assert texts[-1].endswith("Result of your last API call: saved ~/Documents/expenses.xlsx")
    assert "Agent.click(coordinates=[x, y]" in server.requests[0]["body"]["messages"][0]["content"]
