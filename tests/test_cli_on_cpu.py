"""`verl-cua parse` prints the ParsedAction JSON; exit codes say valid (0), invalid output (1), bad arguments (2)."""

import json
import re
import subprocess
import sys

from verl_cua.cli import main


def test_parse_prints_to_dict_json(capsys):
    rc = main(
        [
            "parse",
            "--format",
            "uitars",
            "--screen",
            "1920x1080",
            "--image",
            "1920x1080",
            "Thought: open it\nAction: left_double(start_box='(100,200)')",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert data["valid"] and data["thought"] == "open it"
    assert data["actions"][0]["kind"] == "double_click" and (data["actions"][0]["x"], data["actions"][0]["y"]) == (
        100,
        200,
    )


def test_render_adds_pyautogui_and_computer13(capsys):
    main(["parse", "--format", "claude", "--screen", "1280x720", "--render", '{"action": "key", "text": "ctrl+s"}'])
    data = json.loads(capsys.readouterr().out)
    assert data["pyautogui"] == "pyautogui.hotkey('ctrl', 's')"
    assert data["computer_13"] == [{"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "s"]}}]


def test_invalid_output_exits_1_with_reason(capsys):
    rc = main(["parse", "--format", "pyautogui", "--screen", "1920x1080", "```python\nimport os\n```"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and not data["valid"] and "import of 'os'" in data["error"]


def test_console_script_reads_stdin_and_rejects_bad_screen():
    exe = [sys.executable, "-m", "verl_cua.cli"]
    proc = subprocess.run(
        [*exe, "parse", "--format", "pyautogui", "--screen", "800x600", "-"],
        input="DONE",
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["actions"][0]["kind"] == "done"
    proc = subprocess.run(
        [*exe, "parse", "--format", "pyautogui", "--screen", "800by600", "DONE"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "WIDTHxHEIGHT" in proc.stderr


def test_view_and_compare_commands(tmp_path, capsys):
    from verl_cua.testing.viewer_runs import write_sample_runs
    from verl_cua.viewer import compare_runs

    a, b = write_sample_runs(tmp_path)
    out = tmp_path / "report.html"
    assert main(["view", str(a), str(b), "--out", str(out)]) == 0
    html = out.read_text()
    assert 'data-task="calc/calc-sum-column"' in html and "baseline" in html and "candidate" in html
    assert capsys.readouterr().out.strip() == f"report: {out}"
    assert main(["compare", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == compare_runs(a, b) != []
    assert main(["compare", str(a), str(b)]) == 0
    printed = capsys.readouterr().out
    assert "baseline" in printed and "tasks differ" in printed
    assert main(["view", str(tmp_path / "nope"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("verl-cua view:") and "nope" in err and "\n" not in err


def test_list_prints_the_registered_names_with_their_modules(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")] == [
        "formats",
        "apis",
        "envs",
        "verl",
    ]
    # columns are as wide as the longest name registered in this process (other tests may have added some)
    assert re.search(r"^  qwen3vl +verl_cua\.actions\.formats\.qwen3vl:Qwen3VLFormat$", out, re.M), out
    assert main(["list", "envs"]) == 0
    envs = capsys.readouterr().out
    assert envs.startswith("envs:") and "qwen3vl" not in envs
    assert re.search(r"^  osworld +verl_cua\.envs\.osworld\.env:OSWorldEnv\b", envs, re.M), envs
    proc = subprocess.run([sys.executable, "-m", "verl_cua.cli", "list", "env"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice: 'env'" in proc.stderr
