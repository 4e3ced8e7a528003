"""How our commands end when stopped from outside (`verl_cua.exits`): Ctrl-C is one line and exit 130; a reader that
closed the pipe early ends the command quietly (141), tested on real pipes; a trainer's line names its last saved
checkpoint and how to go on from it."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from verl_cua.exits import INTERRUPTED, PIPE_CLOSED, guarded, latest_checkpoint, stdout_closed, training_stopped

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from verl_cua.cli import main; sys.exit(main())"]
# the same command with no guard: what a closed pipe did before (the negative control)
UNGUARDED = [sys.executable, "-c", "import sys; from verl_cua.cli import build_parser; a = build_parser()"
             ".parse_args(sys.argv[1:]); sys.exit(a.func(a))"]  # fmt: skip


@pytest.fixture(autouse=True)
def _default_sigint():
    """`guarded` leaves SIGINT at its default after a Ctrl-C; the next test gets Python's handler back."""
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)


def test_ctrl_c_is_the_stopped_line_on_stderr_and_130(capsys):
    def run():
        print("partial")
        raise KeyboardInterrupt

    assert guarded(run, lambda: "verl-cua x: stopped by Ctrl-C; kept; go on") == INTERRUPTED
    out, err = capsys.readouterr()
    assert out == "partial\n" and err == "verl-cua x: stopped by Ctrl-C; kept; go on\n"
    assert signal.getsignal(signal.SIGINT) == signal.SIG_DFL  # a second Ctrl-C ends the process, no traceback


def test_other_endings_pass_through(capsys):
    assert guarded(lambda: 4, lambda: "never") == 4
    assert guarded(lambda: None, lambda: "never") == 0
    with pytest.raises(SystemExit) as exc:
        guarded(lambda: sys.exit(2), lambda: "never")
    assert exc.value.code == 2
    with pytest.raises(ValueError):
        guarded(lambda: (_ for _ in ()).throw(ValueError("a bug")), lambda: "never")
    assert capsys.readouterr().err == ""


def test_a_broken_pipe_that_is_not_stdouts_is_raised():
    """A socket's EPIPE (an endpoint gone) is an error of the command, not a reader that left."""

    def run():
        raise BrokenPipeError(32, "Broken pipe")

    assert not stdout_closed()
    with pytest.raises(BrokenPipeError):
        guarded(run, lambda: "never")


def _closed_early(cmd, env=None):
    """Run `cmd` with stdout a pipe whose reader closes before the command writes; (exit status, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    proc.stdout.close()  # the interpreter is still starting: every write it makes meets a closed pipe
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


@pytest.mark.parametrize("args", [["recipe", "list"], ["config"], ["--help"]])
def test_a_closed_pipe_ends_the_cli_quietly(args):
    rc, err = _closed_early([*CLI, *args])
    assert err == "" and rc in (PIPE_CLOSED, 0), (rc, err)  # --help: argparse's exit 0, its output dropped quietly
    if args != ["--help"]:
        assert rc == PIPE_CLOSED


def test_the_negative_control_without_the_guard_shows_the_traceback():
    rc, err = _closed_early([*UNGUARDED, "recipe", "list"])
    assert rc != 0 and "BrokenPipeError" in err and "Traceback" in err


def test_head_one_in_a_shell_pipeline_prints_one_line_and_nothing_else():
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # each line written at once: head has gone before the last ones
    for _ in range(3):
        proc = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" recipe list | head -1', "bash", *CLI],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)  # fmt: skip
        assert len(proc.stdout.splitlines()) == 1 and proc.stderr == "", proc.stderr
        assert proc.returncode in (0, PIPE_CLOSED)


def test_latest_checkpoint_reads_verls_tracker(tmp_path):
    assert latest_checkpoint(tmp_path) is None and latest_checkpoint(None) is None
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("12\n")
    assert latest_checkpoint(tmp_path) == 12
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("torn")
    assert latest_checkpoint(tmp_path) is None


def test_the_trainers_line_names_the_checkpoint_and_how_to_resume(tmp_path):
    trainer = {"default_local_dir": str(tmp_path), "save_freq": -1, "resume_mode": "auto"}
    assert training_stopped("verl-cua", trainer) == (
        "verl-cua: stopped by Ctrl-C during training; no checkpoint saved yet (trainer.save_freq=-1 saves none); "
        "rerun the same command to start again"
    )
    assert "(trainer.save_freq" not in training_stopped("verl-cua", {**trainer, "save_freq": 5})
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")
    assert training_stopped("verl-cua", trainer) == (
        f"verl-cua: stopped by Ctrl-C during training; last saved checkpoint: step 3 in {tmp_path}; rerun the same "
        "command (trainer.resume_mode=auto resumes from it)"
    )
    disabled = training_stopped("verl-cua sft", {**trainer, "resume_mode": "disable"}, started=False)
    assert disabled == (
        f"verl-cua sft: stopped by Ctrl-C before training started; last saved checkpoint: step 3 in {tmp_path}; "
        "rerun the same command with trainer.resume_mode=auto to resume from it"
    )


@pytest.mark.e2e
def test_a_closed_pipe_ends_the_trainers_help_quietly():
    rc, err = _closed_early([sys.executable, "-m", "verl_cua.main", "--help"])
    assert (rc, err) == (PIPE_CLOSED, "")
