"""Ctrl-C in a `verl-cua` subcommand is one line (where it stopped, what it kept, how to go on) and exit 130, not a
traceback: the line of each subcommand, and real SIGINTs sent to the whole process group, as a terminal sends them, to
a command waiting on stdin, to `verl-cua serve` and to `verl-cua eval` mid-episode; a negative control shows the
traceback the guard removes."""

import json
import os
import signal
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import pytest

from verl_cua import cli
from verl_cua.cli_interrupt import stopped_line
from verl_cua.exits import INTERRUPTED
from verl_cua.testing.chat_server import GatedChatServer
from verl_cua.testing.kill import own_group

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from verl_cua.cli import main; sys.exit(main())"]
UNGUARDED = [sys.executable, "-c", "import sys; from verl_cua.cli import build_parser; a = build_parser()"
             ".parse_args(sys.argv[1:]); sys.exit(a.func(a))"]  # fmt: skip
PARSE = ["parse", "--format", "pyautogui", "--screen", "100x100", "-"]  # waits on stdin
SCRIPT = {"Click": ["```python\npyautogui.click(5, 5)\n```", "DONE"]}  # a corner click: a failure, two turns


@pytest.fixture(autouse=True)
def _default_sigint():
    """The guard leaves SIGINT at its default after a Ctrl-C; the next test gets Python's handler back."""
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _run_dir(out: Path, statuses: dict[str, str | None]) -> None:
    """An eval run directory listing `statuses`' tasks, each with a result of that status (None: no result yet)."""
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"tasks": list(statuses)}))
    for key, status in statuses.items():
        (out / key).mkdir(parents=True)
        if status:
            (out / key / "result.json").write_text(json.dumps({"status": status}))


def test_eval_counts_the_finished_tasks_its_rerun_skips(tmp_path):
    out = tmp_path / "run"
    line = stopped_line(Namespace(command="eval", out=str(out)))
    assert (
        line == f"verl-cua eval: stopped by Ctrl-C; nothing written to {out} yet; rerun the same command to start again"
    )
    _run_dir(out, {"t/seed-0": "success", "t/seed-1": "failure", "t/seed-2": "infra_failure", "t/seed-3": None})
    assert stopped_line(Namespace(command="eval", out=str(out))) == (
        f"verl-cua eval: stopped by Ctrl-C; 2 of 4 tasks finished and kept in {out}; rerun the same command to "
        "continue (finished tasks are skipped)"
    )  # an infra failure and a cut-off episode are run again: not kept


def test_every_subcommand_says_what_it_kept(tmp_path):
    report = tmp_path / "check.json"
    line = stopped_line(Namespace(command="osworld-check", out=str(report)))
    assert line.startswith("verl-cua osworld-check: stopped by Ctrl-C; no report written")
    report.write_text(json.dumps({"tasks": [{"id": "a"}, {"id": "b"}]}))
    assert "keeps the 2 tasks checked so far" in stopped_line(Namespace(command="osworld-check", out=str(report)))
    export = stopped_line(Namespace(command="recipe", action="export", dir="x"))
    assert "x may hold part of the export; rerun the same command with --force" in export
    assert stopped_line(Namespace(command="install-osworld")).endswith("rerun the same command to finish")
    assert stopped_line(Namespace(command="list")) == (
        "verl-cua list: stopped by Ctrl-C; nothing written; rerun the same command to start again"
    )
    assert stopped_line(None).startswith("verl-cua: stopped by Ctrl-C;")
    for command in ("eval", "serve", "view", "sft-data", "doctor", "probe-boots", "setup-desktop"):
        out = str(tmp_path / "none")
        assert stopped_line(Namespace(command=command, out=out)).startswith(f"verl-cua {command}: stopped by Ctrl-C; ")


def test_the_cli_prints_the_line_once_and_exits_130(monkeypatch, capsys):
    import verl_cua.listing

    def interrupted(group):
        print("half a listing")
        raise KeyboardInterrupt

    monkeypatch.setattr(verl_cua.listing, "listing", interrupted)
    assert cli.main(["list"]) == INTERRUPTED
    out, err = capsys.readouterr()
    assert out == "half a listing\n"
    assert err == "verl-cua list: stopped by Ctrl-C; nothing written; rerun the same command to start again\n"


def _wait_reading_stdin(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until `proc` blocks in read(2) on fd 0 (/proc/PID/syscall: number 0, first argument 0)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            if Path(f"/proc/{proc.pid}/syscall").read_text().split()[:2] == ["0", "0x0"]:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("the command never waited on stdin")


def _interrupt_while_reading(cmd: list[str]) -> tuple[int, str]:
    """Start `cmd` in its own process group, SIGINT the group once it waits on stdin; (exit status, stderr)."""
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with own_group(cmd, **pipes, text=True, cwd=ROOT) as proc:
        _wait_reading_stdin(proc)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_a_real_sigint_to_the_process_group_is_one_line_and_130():
    rc, err = _interrupt_while_reading([*CLI, *PARSE])
    assert rc == INTERRUPTED and "Traceback" not in err, err
    assert err.splitlines() == [
        "verl-cua parse: stopped by Ctrl-C; nothing written; rerun the same command to start again"
    ]


def test_the_negative_control_without_the_guard_is_a_traceback():
    rc, err = _interrupt_while_reading([*UNGUARDED, *PARSE])
    assert rc != INTERRUPTED and "Traceback" in err and "KeyboardInterrupt" in err, (rc, err)


def test_serve_says_what_it_stopped_serving():
    from verl_cua.testing.tiny_models import build_tiny_model

    cmd = [*CLI, "serve", str(build_tiny_model("qwen25vl")), "--port", "0", "--served-model-name", "tiny"]
    with own_group(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        ready = proc.stdout.readline()
        assert ready.startswith("verl-cua serve: tiny at "), proc.stderr.read()[-3000:]
        url = ready.rsplit(" ", 1)[1].strip()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == INTERRUPTED and "Traceback" not in err, err
    ours = [line for line in err.splitlines() if line.startswith("verl-cua")]
    assert ours == [f"verl-cua serve: stopped serving tiny at {url} (Ctrl-C); it kept nothing; rerun the same command "
                    "to serve again"]  # fmt: skip
    assert err.rstrip().endswith(ours[0])  # the last word


def test_eval_stopped_mid_episode_says_how_many_finished_tasks_its_folder_keeps(tmp_path, chromium):
    out = tmp_path / "run"
    gated = GatedChatServer(SCRIPT, hold=4)  # seed-0: requests 1-2; seed-1: 3 answered, 4 held (its second turn)
    args = [
        "eval",
        "--env",
        "miniwob",
        "--tasks",
        "click-test",
        "--seeds",
        "0-1",
        "--format",
        "pyautogui",
        "--max-steps",
        "3",
        "--model",
        "scripted",
        "--base-url",
        gated.url,
        "--out",
        str(out),
        "--no-progress",
    ]
    try:
        with own_group([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as proc:
            assert gated.held.wait(120), proc.stderr.read()[-3000:] if proc.poll() is not None else "no 4th request"
            os.killpg(proc.pid, signal.SIGINT)  # the eval, its chromium and chromedriver, as a terminal's Ctrl-C
            time.sleep(0.5)
            gated.release.set()  # the episode in flight gets its answer: the eval waits for it, not for a timeout
            _, err = proc.communicate(timeout=120)
    finally:
        gated.release.set()
        gated.close()
    kept = sum(json.loads(p.read_text())["status"] in ("success", "failure") for p in out.glob("*/*/result.json"))
    assert kept >= 1  # seed-0 finished before the held request
    assert proc.returncode == INTERRUPTED and "Traceback" not in err, err
    assert err.splitlines() == [f"verl-cua eval: stopped by Ctrl-C; {kept} of 2 tasks finished and kept in {out}; "
                                "rerun the same command to continue (finished tasks are skipped)"]  # fmt: skip
