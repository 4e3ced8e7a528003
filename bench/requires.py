"""What a bench needs beyond the core install, checked before it does any work.

Each bench names the modules it imports (`require("bench.learn", ("torch", "verl", "miniwob", "matplotlib"))`);
`EXTRAS` says which extra of pyproject.toml brings each, so a missing one stops the bench in one line that names
the install command (exit 2), before a browser, a model or an output folder exists. A bench whose missing part is
optional asks `missing_line` instead, says so and goes on without it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from verl_cua.main import missing_modules as missing  # the trainer's own check, for any modules
from verl_cua.resources import OSWORLD_CLIENT_HINT, install_hint

# module -> the extra that installs it (pyproject.toml's order); the core install brings numpy, pillow, httpx, rich
EXTRAS = {
    "torch": "verl",
    "verl": "verl",
    "omegaconf": "verl",
    "peft": "verl",
    "pandas": "verl",
    "pyarrow": "verl",
    "desktop_env": "osworld",
    "miniwob": "miniwob",
    "psutil": "miniwob",
    "matplotlib": "bench",
    "ui_tars": "bench",
}
EXTRA_ORDER = ("verl", "osworld", "miniwob", "bench")
# modules no extra installs: the command that does, run after the extras
THEN = {"desktop_env": OSWORLD_CLIENT_HINT}


def install_command(modules: Iterable[str]) -> str:
    """The command(s) that install `modules` (each known to `EXTRAS`)."""
    modules = list(modules)
    unknown = [m for m in modules if m not in EXTRAS]
    if unknown:
        raise KeyError(f"bench.requires: no extra known for {', '.join(unknown)}; add it to EXTRAS")
    extras = {EXTRAS[m] for m in modules}
    steps = [install_hint(*(e for e in EXTRA_ORDER if e in extras))]
    steps += dict.fromkeys(THEN[m] for m in modules if m in THEN)
    return " && ".join(steps)


def missing_line(modules: Iterable[str]) -> str | None:
    """`needs A, B (not installed); install with: CMD` for the missing `modules`, or None when all are there."""
    absent = missing(modules)
    if not absent:
        return None
    return f"needs {', '.join(absent)} (not installed); install with: {install_command(absent)}"


def require(bench: str, modules: Iterable[str]) -> None:
    """Exit 2 with one line on stderr naming the missing `modules` and their install command; return if none is."""
    line = missing_line(modules)
    if line is not None:
        print(f"{bench}: {line}", file=sys.stderr, flush=True)
        raise SystemExit(2)
