"""`verl-cua probe-boots --desktops N --vm-path PATH`: boot N docker desktops on this host, the way a training pool's
first wave does, and report boot-time percentiles, desktop-env's lock waits and holds, and the settings they call for.

It boots one desktop alone first (the host's quiet boot), then N at once through our `LabelledDockerProvider` (its
lock, boot slots and spaced starts, with the options given), and removes every container it ran, by label, also on
Ctrl-C. The suggestion: `docker_boot_batch`, the most boots at once whose boot, interpolated between the quiet boot
and the wave's 90th percentile, stays within half of `docker_boot_timeout` (a boot that timed out counts with the
seconds it waited); the timeout raised only when one boot alone needs more than half of it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

SUMMARY_KEYS = ("slot_wait", "lock_wait", "lock_hold", "boot")
CLOSE_GRACE = 15.0  # seconds a start still running at Ctrl-C gets to see its desktop closed
_STARTING: list[threading.Thread] = []


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    """p50, p90 and max of `values` (nearest rank), rounded to the millisecond; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"p50": round(rank(0.5), 3), "p90": round(rank(0.9), 3), "max": round(ordered[-1], 3)}


def suggest(quiet_boot: float, wave_p90: float, desktops: int, timeout: float) -> dict[str, int]:
    """The settings a wave's boots call for: the largest batch whose boot, interpolated between the quiet boot (1 at
    once) and the wave's p90 (`desktops` booting at once), is within half of `timeout`; the timeout itself raised to
    twice the quiet boot when even one boot alone needs more than half of it."""
    half = timeout / 2
    if quiet_boot > half:
        return {"docker_boot_batch": 1, "docker_boot_timeout": math.ceil(2 * quiet_boot)}
    batch = desktops
    per_boot = (wave_p90 - quiet_boot) / (desktops - 1) if desktops > 1 else 0.0  # seconds each boot at once adds
    if wave_p90 > half and per_boot > 0:
        batch = min(desktops, 1 + math.floor((half - quiet_boot) / per_boot))
    return {"docker_boot_batch": int(batch), "docker_boot_timeout": math.ceil(timeout)}


def probe_boots(
    desktops: int,
    path_to_vm: str,
    options: Mapping[str, float] | None = None,
    *,
    quiet_first: bool = True,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Boot one desktop alone (`quiet_first`), then `desktops` at once; their times, failures and suggestions."""
    from verl_cua.envs.osworld import docker_fleet

    if desktops < 1:
        raise ValueError(f"--desktops must be at least 1, got {desktops}")
    opts = docker_fleet.pop_options(dict(options or {}))
    providers: list[Any] = []  # every desktop the probe made and has not closed
    report: dict[str, Any] = {"desktops": desktops, "options": opts}
    try:
        if quiet_first:
            say("probe-boots: one desktop alone ...")
            quiet = _wave(1, path_to_vm, opts, providers)
            report["quiet"] = quiet
            _close(providers)
        say(f"probe-boots: {desktops} desktops at once ...")
        started = time.monotonic()
        report["wave"] = _wave(desktops, path_to_vm, opts, providers)
        report["wave_s"] = round(time.monotonic() - started, 3)
    finally:
        _close(providers)
    wave = report["wave"]
    boots = wave["boot"]
    if boots is not None:
        quiet_boot = (report.get("quiet") or {}).get("boot") or {"p50": boots["p50"]}
        at_once = min(int(opts["docker_boot_batch"]) or desktops, desktops)  # the most that booted together
        report["suggested"] = suggest(quiet_boot["p50"], boots["p90"], at_once, opts["docker_boot_timeout"])
    return report


def _wave(count: int, path_to_vm: str, opts: Mapping[str, float], providers: list[Any]) -> dict[str, Any]:
    """Start `count` desktops in threads at once; their times (seconds) and errors."""
    from verl_cua.envs.osworld import docker_fleet

    wave = [docker_fleet.LabelledDockerProvider(None, opts) for _ in range(count)]
    providers.extend(wave)
    errors: list[str | None] = [None] * count

    def start(i: int) -> None:
        try:
            wave[i].start_emulator(path_to_vm, True, "Ubuntu")
        except Exception as exc:
            errors[i] = f"{type(exc).__name__}: {exc}"[:300]

    threads = [threading.Thread(target=start, args=(i,), daemon=True) for i in range(count)]
    _STARTING.extend(threads)
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # join in slices: Ctrl-C reaches the main thread
            thread.join(0.2)
    # every start's times, a failed one's too: a boot that timed out counts with the seconds it waited
    times = [p.starts[-1] for p in wave if p.starts]
    out: dict[str, Any] = {key: percentiles([getattr(t, key) for t in times]) for key in SUMMARY_KEYS if key != "boot"}
    out["boot"] = percentiles([t.boot for t in times if t.boot > 0])  # a start that never reached its boot: none
    out["port_scans"] = sum(t.port_scans for p in wave for t in p.starts)
    out["failed"] = sum(error is not None for error in errors)
    out["errors"] = sorted({error for error in errors if error})[:5]
    return out


def _close(providers: list[Any]) -> None:
    """Remove every container the probe ran (by each desktop's label); a start still running (Ctrl-C) is given
    `CLOSE_GRACE` seconds, so a container docker was making when it closed is removed as it arrives."""
    while providers:
        providers.pop().close()
    deadline = time.monotonic() + CLOSE_GRACE
    while _STARTING:
        _STARTING.pop().join(max(0.0, deadline - time.monotonic()))


def lines(report: Mapping[str, Any]) -> list[str]:
    """The report for a person: one line per figure, then the settings to use."""
    out = []
    for name in ("quiet", "wave"):
        part = report.get(name)
        if not part:
            continue
        label = "alone" if name == "quiet" else f"{report['desktops']} at once"
        for key in SUMMARY_KEYS:
            if part[key]:
                figures = ", ".join(f"{q} {v:.2f} s" for q, v in part[key].items())
                out.append(f"{label}: {key.replace('_', ' ')}: {figures}")
        if part["failed"]:
            out.append(f"{label}: {part['failed']} failed: {'; '.join(part['errors'])}")
    if "suggested" in report:
        s = report["suggested"]
        out.append(f"suggested: +cua.env.kwargs.docker_boot_batch={s['docker_boot_batch']} "
                   f"+cua.env.kwargs.docker_boot_timeout={s['docker_boot_timeout']}")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    """`verl-cua probe-boots`: exit 0 when every boot came up, 1 when some failed, 2 on bad input, 130 on Ctrl-C."""
    args = build_parser().parse_args(argv)
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run the probe from parsed arguments."""
    options = {"docker_boot_batch": 0 if args.batch is None else args.batch}  # 0: the whole wave at once
    if args.boot_timeout is not None:
        options["docker_boot_timeout"] = args.boot_timeout
    if not Path(args.vm_path).is_file():
        print(f"verl-cua probe-boots: no desktop image at {args.vm_path} (--vm-path: the recipe's VM_PATH)",
              file=sys.stderr)  # fmt: skip
        return 2
    import docker

    try:
        report = probe_boots(args.desktops, args.vm_path, options, quiet_first=not args.no_quiet)
    except docker.errors.DockerException as exc:
        print(f"verl-cua probe-boots: the Docker engine did not answer: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("verl-cua probe-boots: stopped; every container it ran was removed, no figure kept", file=sys.stderr)
        return 130
    except (ValueError, ImportError, FileNotFoundError) as exc:
        print(f"verl-cua probe-boots: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report))
    else:
        print("\n".join(lines(report)))
    return 1 if report["wave"]["failed"] or (report.get("quiet") or {}).get("failed") else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The probe's options."""
    p.add_argument("--desktops", type=int, default=32, help="desktops booted at once (default 32, the flagship's)")
    p.add_argument("--vm-path", required=True, help="the desktop image (Ubuntu.qcow2; the recipe's VM_PATH)")
    p.add_argument("--batch", type=int, default=None,
                   help="docker_boot_batch for the probe's starts (default: the desktops, all at once)")  # fmt: skip
    p.add_argument("--boot-timeout", type=float, default=None, help="docker_boot_timeout (default 300 s)")
    p.add_argument("--no-quiet", action="store_true", help="skip the one boot alone before the wave")
    p.add_argument("--json", action="store_true", help="the report as one JSON line")


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The probe's own parser (`python -m verl_cua.envs.osworld.boot_probe`)."""
    parser = parser or argparse.ArgumentParser(prog="verl-cua probe-boots", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main())
