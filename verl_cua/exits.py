"""How our commands end when stopped from outside: Ctrl-C prints one line (where the command stopped, what it kept,
how to go on) and exits 130; a reader that closed the pipe early (`verl-cua recipe list | head -1`) ends the command
quietly, exit 141, as a command killed by SIGPIPE would. The trainers' line reads verl's checkpoint tracker. Stdlib
only: every entry point uses it."""

from __future__ import annotations

import os
import select
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a command that Ctrl-C ended
PIPE_CLOSED = 141  # 128 + SIGPIPE
TRACKER = "latest_checkpointed_iteration.txt"  # verl's: the step of the last checkpoint under default_local_dir


def guarded(run: Callable[[], int | None], stopped: Callable[[], str]) -> int:
    """`run()`'s exit status; Ctrl-C: `stopped()`'s line on stderr and 130; a closed stdout: a quiet 141."""
    try:
        try:
            status = run()
        except SystemExit:  # --help, a usage error, a one-line exit: what was printed must reach the reader too
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush (a traceback there)
        return status or 0
    except KeyboardInterrupt:
        interrupted()
        print(stopped(), file=sys.stderr, flush=True)
        return INTERRUPTED
    except BrokenPipeError:
        if not stdout_closed():
            raise  # a socket's, not our reader's
        return pipe_closed()


def interrupted() -> None:
    """After the first Ctrl-C: a second one ends the process at once, with no traceback (the default action)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    except ValueError:  # not the main thread
        pass


def stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def pipe_closed() -> int:
    """Point stdout at /dev/null (what is still buffered goes nowhere, quietly) and return 141."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass
    return PIPE_CLOSED


def latest_checkpoint(folder: str | os.PathLike | None) -> int | None:
    """The step of the last checkpoint verl saved under `folder` (its tracker file), or None when there is none."""
    if not folder:
        return None
    try:
        return int((Path(folder).expanduser() / TRACKER).read_text().strip())
    except (OSError, ValueError):
        return None


def training_stopped(prog: str, trainer: Mapping[str, Any], started: bool = True) -> str:
    """The one line for a training run that Ctrl-C stopped (`trainer`: the config's trainer section): where it
    stopped, the last checkpoint saved (or none yet) and the command that goes on from it."""
    where = "during training" if started else "before training started"
    folder = trainer.get("default_local_dir")
    step = latest_checkpoint(folder)
    if step is None:
        save_freq = trainer.get("save_freq")
        why = f" (trainer.save_freq={save_freq} saves none)" if isinstance(save_freq, int) and save_freq <= 0 else ""
        return f"{prog}: stopped by Ctrl-C {where}; no checkpoint saved yet{why}; rerun the same command to start again"
    if trainer.get("resume_mode") == "auto":
        how = "rerun the same command (trainer.resume_mode=auto resumes from it)"
    else:
        how = "rerun the same command with trainer.resume_mode=auto to resume from it"
    return f"{prog}: stopped by Ctrl-C {where}; last saved checkpoint: step {step} in {folder}; {how}"
