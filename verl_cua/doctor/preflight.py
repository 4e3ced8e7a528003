"""The preflight: `verl-cua doctor`'s machine checks on a run's resolved config, before Ray or torchrun starts.
Every blocker is one printed line; `SKIP_PREFLIGHT=1` (or `cua.preflight.skip=true`) skips them.

`python -m verl_cua.doctor.preflight --gpus N --model PATH` checks a run that has no trainer config to compose
(the SFT recipe, before torchrun starts N processes)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from verl_cua.doctor.report import Finding

SKIP_VAR = "SKIP_PREFLIGHT"
TRUE = ("1", "true", "yes", "on")


class PreflightError(RuntimeError):
    """What stands between this machine and the run: one line per blocker, then how to skip the checks."""


def skipped(config: dict[str, Any] | None = None) -> bool:
    """Whether SKIP_PREFLIGHT or `cua.preflight.skip` turns the checks off."""
    if os.environ.get(SKIP_VAR, "").lower() in TRUE:
        return True
    return bool((((config or {}).get("cua") or {}).get("preflight") or {}).get("skip"))


def blockers(config: dict[str, Any]) -> list[Finding]:
    """The doctor's system findings for `config` that block the run."""
    from verl_cua.doctor.system import system_findings

    return [finding for finding in system_findings(config) if finding.level == "FAIL"]


def check_preflight(config: dict[str, Any], prog: str = "verl-cua") -> None:
    """Raise `PreflightError` naming every blocker of `config` (a resolved trainer config), unless skipped."""
    if skipped(config):
        return
    found = blockers(config)
    if found:
        lines = [f"{prog}: {finding.check}: {finding.detail}" for finding in found]
        lines.append(f"{prog}: {len(found)} blocker(s) before the run starts; {SKIP_VAR}=1 starts it anyway")
        raise PreflightError("\n".join(lines))


def standalone_config(gpus: int, model: str, nnodes: int = 1) -> dict[str, Any]:
    """The parts of a trainer config the checks read, for a run with `gpus` GPUs per node on `model`."""
    return {
        "trainer": {"device": "cuda" if gpus > 0 else "cpu", "nnodes": nnodes, "n_gpus_per_node": gpus},
        "actor_rollout_ref": {"model": {"path": model}, "rollout": {"name": "none"}},
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m verl_cua.doctor.preflight --gpus N --model PATH [--nnodes K]`: 1 and a line per blocker, else 0."""
    parser = argparse.ArgumentParser(prog="verl-cua preflight", description=main.__doc__)
    parser.add_argument("--gpus", type=int, required=True, help="GPUs per node the run starts processes on")
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--model", required=True, help="the model folder or hub name the run loads")
    parser.add_argument("--prog", default="verl-cua", help="the name the lines start with (the recipe's)")
    args = parser.parse_args(argv)
    try:
        check_preflight(standalone_config(args.gpus, args.model, args.nnodes), prog=args.prog)
    except PreflightError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
