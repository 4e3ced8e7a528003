"""`verl-cua osworld-check`: classification of OSWorld-format tasks (internet / vm-only / offline), the benchmark's
meta file, the coverage table, and the whole check on a real local desktop over an `evaluation_examples` folder
made here from our own tasks (OSWorld's task files are never shipped)."""

import json
import shutil
from pathlib import Path

import pytest

from verl_cua.cli import main
from verl_cua.envs.osworld.coverage import classify, coverage_table, format_table, run_check, task_files
from verl_cua.envs.osworld.tasks import task_path

BASE = {"id": "t", "instruction": "Do it.", "config": [], "evaluator": {"func": "exact_match", "result": {}}}


def _task(**changes) -> dict:
    return {**json.loads(json.dumps(BASE)), **changes}


@pytest.mark.parametrize(
    "task, domain, kind, reason",
    [
        (_task(), "os", "offline", ""),
        (_task(config=[{"type": "download", "parameters": {"files": [{"url": "https://x.org/a.xlsx"}]}}]), "",
         "internet", "setup step"),
        (_task(config=[{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://127.0.0.1:8000/"]}}]), "",
         "offline", ""),  # loopback is not the web
        (_task(config=[{"type": "googledrive", "parameters": {}}]), "", "internet", "googledrive"),
        (_task(evaluator={"func": "x", "result": {"type": "cloud_file", "path": "https://x.org/f"}}), "",
         "internet", "evaluator"),
        (_task(instruction="Download https://example.com/a.png and crop it."), "", "internet", "instruction"),
        (_task(proxy=True), "", "internet", "proxy"),
        (_task(), "Windows", "vm-only", "Windows"),
        (_task(evaluator={"func": "x", "result": {"type": "vm_command_line", "command": "timedatectl status"}}),
         "os", "vm-only", "systemd"),
        (_task(evaluator={"func": "x", "result": {"type": "vm_command_line", "command": "dpkg -l | grep vim"}}),
         "os", "vm-only", "packages"),
        (_task(evaluator={"func": "x", "postconfig": [{"type": "command", "parameters": {"command": ["apt", "list",
         "--installed"]}}], "result": {}}), "multi_apps", "vm-only", "packages"),
        (_task(instruction="Please uninstall the Mahjongg game."), "os", "vm-only", "installs or removes"),
        (_task(instruction="Install the Dark Reader extension in Chrome."), "chrome", "offline", ""),
        (_task(config=[{"type": "launch", "parameters": {"command": ["code", "/home/user"]}}]), "multi_apps",
         "vm-only", "VS Code"),
    ],
)  # fmt: skip
def test_classify_names_why_a_task_cannot_run_here(task, domain, kind, reason):
    got, why = classify(task, domain)
    assert got == kind
    assert reason in why if reason else why == ""


def _examples(tmp_path: Path, tasks: dict[str, list[dict]], meta: dict | None = None) -> Path:
    root = tmp_path / "evaluation_examples"
    for domain, items in tasks.items():
        (root / "examples" / domain).mkdir(parents=True)
        for item in items:
            (root / "examples" / domain / f"{item['id']}.json").write_text(json.dumps(item))
    if meta is not None:
        (root / "test_all.json").write_text(json.dumps(meta))
    return root


def test_task_files_follow_the_meta_file_and_name_unknown_domains(tmp_path):
    root = _examples(tmp_path, {"os": [_task(id="a"), _task(id="b")], "gimp": [_task(id="c")]}, {"os": ["a"]})
    assert [p.stem for p in task_files(root)] == ["a"]  # drafts not in test_all.json are not the benchmark
    assert [p.stem for p in task_files(root, meta=None)] == ["c", "a", "b"]
    with pytest.raises(ValueError, match="unknown domain.*nope.*has: gimp, os"):
        task_files(root, ["nope"], meta=None)
    with pytest.raises(FileNotFoundError, match="not an OSWorld evaluation_examples folder"):
        task_files(tmp_path / "nowhere")


def test_the_table_counts_each_kind_and_status_per_domain():
    entries = [
        {"domain": "os", "kind": "offline", "status": "pass", "reset_s": 1.0},
        {"domain": "os", "kind": "offline", "status": "no-read", "reset_s": 3.0},
        {"domain": "os", "kind": "internet"},
        {"domain": "vlc", "kind": "offline", "status": "setup-failed", "reset_s": 9.0},
        {"domain": "vlc", "kind": "vm-only"},
    ]
    rows = {r["domain"]: r for r in coverage_table(entries)}
    assert rows["os"]["pass_pct"] == 50.0 and rows["os"]["reset_median_s"] == 2.0
    assert (rows["os"]["offline"], rows["os"]["internet"], rows["os"]["vm-only"]) == (2, 1, 0)
    assert rows["vlc"]["setup-failed"] == 1 and rows["vlc"]["pass_pct"] == 0.0 and rows["vlc"]["reset_median_s"] is None
    assert rows["total"]["tasks"] == 5 and rows["total"]["pass"] == 1
    assert format_table(list(rows.values())).splitlines()[0].split()[:3] == ["domain", "tasks", "offline"]


def test_the_cli_says_what_is_wrong_in_one_line(tmp_path, capsys):
    assert main(["osworld-check", str(tmp_path / "missing"), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verl-cua osworld-check: ") and err.count("\n") == 1


def test_the_check_on_a_real_desktop_scores_offline_tasks_honestly(local_desktop, tmp_path):
    feasible = json.loads(task_path("term-create-file").read_text())  # ours: the file is the agent's to make
    broken = _task(id="needs-missing-app", config=[{"type": "launch", "parameters": {"command": ["no-such-app"]}}],
                   evaluator={"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"},
                              "expected": {"type": "rule", "rules": {"expected": "x"}}})  # fmt: skip
    infeasible = _task(id="impossible", instruction="Print on the office printer.", evaluator={"func": "infeasible"})
    scored = _task(id="already-done", evaluator={"func": "exact_match", "result": {"type": "vm_command_line",
                   "command": "echo same"}, "expected": {"type": "rule", "rules": {"expected": "same\n"}}})  # fmt: skip
    web = _task(id="web", instruction="Open https://example.com/ in Chrome.")
    root = _examples(tmp_path, {"os": [feasible, broken, infeasible, scored], "chrome": [web]})
    for asset in task_path("term-create-file").parent.glob("assets"):
        shutil.copytree(asset, root / "examples" / "os" / "assets")
    report = run_check(root, tmp_path / "report.json", progress=False)
    status = {e["id"]: e.get("status") or e["kind"] for e in report["tasks"]}
    assert status == {
        feasible["id"]: "pass",
        "needs-missing-app": "setup-failed",
        "impossible": "pass",
        "already-done": "scored-without-acting",
        "web": "internet",
    }
    by_id = {e["id"]: e for e in report["tasks"]}
    assert by_id["impossible"]["before"] == 0.0 and by_id["impossible"]["after_fail"] == 1.0
    assert "no-such-app" in by_id["needs-missing-app"]["error"]
    assert all(": ok" in r for r in by_id[feasible["id"]]["reads"])
    assert json.loads((tmp_path / "report.json").read_text())["table"][-1]["pass"] == 2
