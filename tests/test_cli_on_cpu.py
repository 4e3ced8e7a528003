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


def _entry(help_text: str, invocation: str) -> str:
    """The help of one argument: its line in `help_text` and the indented lines that continue it."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(invocation))
    entry = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * 6) or line.strip().startswith("-"):
            break
        entry.append(line)
    return " ".join(" ".join(entry).split())


def test_every_subcommands_help_shows_its_defaults_and_examples():
    from verl_cua.cli import build_parser
    from verl_cua.cli_help import subparsers

    commands = subparsers(build_parser())
    assert {"eval", "sft-data", "config", "doctor", "view", "recipe export", "install-osworld"} <= set(commands)
    for path, parser in commands.items():
        text = parser.format_help()
        assert f"examples:\n  verl-cua {path}" in text or f"examples:\n  sudo verl-cua {path}" in text, path
        for action in parser._actions:
            if not action.option_strings or action.required or action.nargs == 0:
                continue  # positionals, required options and flags have no default to show
            entry = _entry(text, parser._get_formatter()._format_action_invocation(action))
            assert "default" in entry, (path, entry)
            if action.default not in (None, {}) and "default" not in (action.help or ""):
                assert f"(default: {action.default})" in entry or entry.endswith(f"default: {action.default}")


def test_eval_help_in_a_terminal_shows_defaults_and_an_example():
    proc = subprocess.run([sys.executable, "-m", "verl_cua.cli", "eval", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--max-steps MAX_STEPS model turns an episode may take (default: 15)" in text
    assert "--provider-api {anthropic,openai} the endpoint's chat API (default: openai)" in text
    assert "examples: verl-cua eval --env miniwob" in text


def test_the_top_level_help_has_one_line_per_command_and_the_first_hours_examples():
    from verl_cua.cli import build_parser

    proc = subprocess.run([sys.executable, "-m", "verl_cua.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for choice in sub._choices_actions:  # the command, then its whole help, on one line
        assert sum(1 for line in lines if line.split() == [choice.dest, *choice.help.split()]) == 1, choice.dest
    examples = proc.stdout.split("examples (the first hour):\n")[1].split("\n\n")[0]
    starts = [line.split()[:2] for line in examples.splitlines() if not line.startswith("      ")]
    assert starts == [["bash", "recipes/quickstart.sh"], ["verl-cua", "doctor"], ["verl-cua", "eval"],
                      ["verl-cua", "view"]]  # fmt: skip


def test_version_names_verl_cua_and_verl_without_importing_them():
    import importlib.metadata

    code = ("import sys\nfrom verl_cua.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit as e:\n"
            "    print(e.code, sorted(m for m in ('torch', 'verl', 'ray') if m in sys.modules))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    versions = f"verl-cua {importlib.metadata.version('verl-cua')} (verl {importlib.metadata.version('verl')})"
    assert proc.stdout.splitlines() == [versions, "0 []"]


def test_version_without_installed_metadata_falls_back_to_the_package(monkeypatch):
    import importlib.metadata

    import verl_cua
    from verl_cua.cli_help import version_text

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert version_text() == f"verl-cua {verl_cua.__version__}"
