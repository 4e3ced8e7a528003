"""OSWorld's metrics run in a bounded child process: they parse files the agent wrote, on the host.

A metric reads what the getters fetched from the desktop (a spreadsheet, a document, an image), so its input is the
agent's. A small xlsx of millions of cells costs a parser minutes and gigabytes; in the trainer's process that would
stall the evaluation past the pool's timeout (a masked episode, and a thread left running). Here each metric call runs
in a fresh Python (`python -m verl_cua.envs.osworld.metric_entry`) that loads the metric, then limits its own address
space and CPU time before the metric reads anything; the parent kills it at a wall-clock bound. A limit blown is the
agent's 0 (`MetricLimit`, which the env scores 0 with the reason); a child that never got to the metric is our
failure (`MetricChildBroken`, an infra failure). Office files (zip containers) are screened first by their
uncompressed size. The child gets its arguments pickled from the parent (trusted) and answers in JSON (never
unpickled: the child parsed hostile files).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pickle
import subprocess
import sys
import zipfile

from verl_cua.envs.osworld.sandbox import GiB, MiB, parse_size

READY = b"ready\n"  # the child's first line: the metric is loaded and the limits are about to be set
ENTRY = "verl_cua.envs.osworld.metric_entry"  # the child's module (it imports the evaluators; this one must not)
OFFICE_SUFFIXES = (".xlsx", ".xlsm", ".docx", ".pptx", ".ods", ".odt", ".odp", ".zip")


class MetricLimit(RuntimeError):
    """A metric blew its memory, CPU or wall-clock bound, or its input was over the size screen: the agent's 0."""


class MetricChildBroken(RuntimeError):
    """The child failed before it ran the metric (our fault, never the agent's: an infra failure, not a 0)."""


@dataclasses.dataclass(frozen=True)
class MetricLimits:
    """What one metric call may use (VERL_CUA_METRIC_MEMORY, _CPU_SECONDS, _WALL_SECONDS, _UNZIPPED)."""

    memory: int = 3 * GiB  # address space (RLIMIT_AS): pandas and openpyxl map about 1 GiB on import
    cpu_seconds: int = 60
    wall_seconds: float = 75.0  # under the env's 90 s evaluate_timeout
    unzipped: int = 256 * MiB  # an office file's members, uncompressed, together

    @classmethod
    def from_env(cls) -> MetricLimits:
        """Defaults, overridden by the environment."""
        env = os.environ.get
        return cls(
            memory=parse_size(env("VERL_CUA_METRIC_MEMORY") or str(cls.memory), "VERL_CUA_METRIC_MEMORY"),
            cpu_seconds=int(env("VERL_CUA_METRIC_CPU_SECONDS") or cls.cpu_seconds),
            wall_seconds=float(env("VERL_CUA_METRIC_WALL_SECONDS") or cls.wall_seconds),
            unzipped=parse_size(env("VERL_CUA_METRIC_UNZIPPED") or str(cls.unzipped), "VERL_CUA_METRIC_UNZIPPED"),
        )


def bounded(name: str, fn):
    """`fn` (the metric `name`) run in a bounded child process; same signature and result."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return call_metric(name, args, kwargs)

    run.__verl_cua_bounded__ = True
    return run


def call_metric(name: str, args: tuple, kwargs: dict, limits: MetricLimits | None = None):
    """Run OSWorld's metric `name` on `args` in a child process; its result (a number or a bool)."""
    limits = limits or MetricLimits.from_env()
    screen_office_files((args, kwargs), limits.unzipped)
    request = pickle.dumps((name, args, kwargs, limits))
    proc = subprocess.Popen(
        [sys.executable, "-s", "-m", ENTRY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd="/", start_new_session=True,
    )  # fmt: skip
    timed_out = False
    try:
        out, err = proc.communicate(request, timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    if not out.startswith(READY):  # it never got to the metric: our failure (an install, a busy host), not the agent's
        last = (err.decode(errors="replace").strip().splitlines() or ["no message"])[-1][:300]
        why = (
            f"did not load it in {limits.wall_seconds:g} s"
            if timed_out
            else f"failed to start (exit {proc.returncode})"
        )
        raise MetricChildBroken(f"the metric child for {name} {why}: {last}")
    if timed_out:
        raise MetricLimit(f"metric {name} ran past {limits.wall_seconds:g} s (killed)")
    try:
        answer = json.loads(out[len(READY) :].decode(errors="replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        answer = None
    if not isinstance(answer, dict):  # died under its limits, on the agent's file
        raise MetricLimit(f"metric {name} died without an answer ({_death(proc.returncode, limits)})")
    if "error" in answer:
        if answer.get("limit"):
            raise MetricLimit(f"metric {name}: {answer['error']}")
        raise RuntimeError(f"metric {name} raised {answer['error']}")
    return answer["result"]


def _death(returncode: int, limits: MetricLimits) -> str:
    if returncode in (-9, -24):  # SIGKILL, SIGXCPU: the CPU limit (the soft one signals, the hard one kills)
        return f"over {limits.cpu_seconds} s of CPU" if returncode == -24 else "killed"
    return f"exit {returncode}"


def screen_office_files(value, cap: int) -> None:
    """MetricLimit when a path in `value` (nested lists, tuples, dicts) is a zip container whose members uncompress
    to over `cap` bytes together (a zip bomb or a sheet of millions of cells)."""
    if isinstance(value, str):
        if value.lower().endswith(OFFICE_SUFFIXES) and os.path.isfile(value):
            try:
                with zipfile.ZipFile(value) as archive:
                    total = sum(info.file_size for info in archive.infolist())
            except (zipfile.BadZipFile, OSError, ValueError):
                return  # not a zip: the metric says what it makes of it
            if total > cap:
                raise MetricLimit(f"{os.path.basename(value)} uncompresses to {total} bytes, over the {cap}-byte cap")
    elif isinstance(value, (list, tuple)):
        for item in value:
            screen_office_files(item, cap)
    elif isinstance(value, dict):
        for item in value.values():
            screen_office_files(item, cap)
