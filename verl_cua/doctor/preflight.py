"""The preflight: `verl-cua doctor`'s machine checks on a run's resolved config, before Ray or torchrun starts.
Every blocker is one printed line; `SKIP_PREFLIGHT=1` (or `cua.preflight.skip=true`) skips them.

`python -m verl_cua.doctor.preflight --gpus N --model PATH` checks what a recipe's variables (and appended
overrides) ask before a slow step: the SFT recipe before torchrun starts N processes, the OSWorld recipes before
they download the VM image (with `--provider docker`: the daemon, KVM and the image's disk; `--blocker`: what the
recipe's interpreter lacks, so that every blocker is named at once; `cua.planner.*` and `cua.executor.*` overrides: a
planner run's executor endpoint, `verl_cua.doctor.executor`). `verl_cua.main` checks the composed config again before
Ray starts."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from verl_cua.doctor.finding import Finding

SKIP_VAR = "SKIP_PREFLIGHT"
TRUE = ("1", "true", "yes", "on")


class PreflightError(RuntimeError):
    """What stands between this machine and the run: one line per blocker, then how to skip the checks."""


def skipped(config: dict[str, Any] | None = None) -> bool:
    """Whether SKIP_PREFLIGHT or `cua.preflight.skip` turns the checks off."""
    if os.environ.get(SKIP_VAR, "").lower() in TRUE:
        return True
    return bool((((config or {}).get("cua") or {}).get("preflight") or {}).get("skip"))


def blockers(config: dict[str, Any], host: str = "verl") -> list[Finding]:
    """The doctor's system findings for `config` that block the run, and a planner run's executor endpoint."""
    from verl_cua.doctor.executor import executor_findings
    from verl_cua.doctor.system import system_findings

    found = [*system_findings(config, host), *executor_findings(config)]
    return [finding for finding in found if finding.level == "FAIL"]


def check_preflight(
    config: dict[str, Any],
    prog: str = "verl-cua",
    host: str = "verl",
    extra: list[Finding] | None = None,
    first: list[Finding] | None = None,
) -> None:
    """Raise `PreflightError` naming every blocker of `config` (a resolved trainer config, of our trainer or of
    verl-agent's as `host` says) and the `extra` ones found apart (`first`: listed before the others), unless
    skipped."""
    if skipped(config):
        return
    found = [*(first or []), *blockers(config, host), *(extra or [])]
    if found:
        lines = [f"{prog}: {finding.check}: {finding.detail}" for finding in found]
        lines.append(f"{prog}: {len(found)} blocker(s) before the run starts; {SKIP_VAR}=1 starts it anyway")
        raise PreflightError("\n".join(lines))


OVERRIDES = {  # Hydra keys a recipe's appended overrides may set that the standalone checks read
    "trainer.nnodes": ("trainer", "nnodes"),
    "trainer.n_gpus_per_node": ("trainer", "n_gpus_per_node"),
    "trainer.device": ("trainer", "device"),
    "trainer.logger": ("trainer", "logger"),
    "actor_rollout_ref.model.path": ("model", "path"),
    "model.path": ("model", "path"),  # the SFT trainer's key
    "actor_rollout_ref.rollout.name": ("rollout", "name"),
    "actor_rollout_ref.rollout.tensor_model_parallel_size": ("rollout", "tensor_model_parallel_size"),
}
CUA_SECTIONS = ("planner", "executor")  # `cua.<section>.<key>` overrides the standalone checks read (the executor's)


def standalone_config(
    gpus: int,
    model: str,
    nnodes: int = 1,
    tp: int = 1,
    rollout: str = "none",
    overrides: list[str] | None = None,
    logger: str | None = None,
) -> dict[str, Any]:
    """The parts of a trainer config the checks read, for a run with `gpus` GPUs per node on `model` logging to
    `logger` (`[console,wandb]`); Hydra `overrides` (`key=value`, as appended to a recipe) win for the keys in
    OVERRIDES and set `cua.planner.*` and `cua.executor.*` (as strings; `null` as None), the others are ignored."""
    trainer: dict[str, Any] = {"device": "cuda" if gpus > 0 else "cpu", "nnodes": nnodes, "n_gpus_per_node": gpus}
    if logger:
        trainer["logger"] = logger
    parts: dict[str, dict[str, Any]] = {
        "trainer": trainer,
        "model": {"path": model},
        "rollout": {"name": rollout, "tensor_model_parallel_size": tp},
    }
    cua: dict[str, dict[str, Any]] = {}
    for override in overrides or []:
        key, _, value = override.lstrip("+~").partition("=")
        if key in OVERRIDES and value:
            section, field = OVERRIDES[key]
            parts[section][field] = int(value) if value.isdigit() else value
        elif _cua_key(key):
            _, section, field = key.split(".")
            cua.setdefault(section, {})[field] = None if value in ("null", "~") else value
    config: dict[str, Any] = {
        "trainer": trainer,
        "actor_rollout_ref": {"model": parts["model"], "rollout": parts["rollout"]},
    }
    if cua:
        config["cua"] = cua
    return config


def _cua_key(key: str) -> bool:
    """Whether `key` is a `cua.<section>.<key>` of CUA_SECTIONS."""
    head, _, rest = key.partition(".")
    section, _, field = rest.partition(".")
    return head == "cua" and section in CUA_SECTIONS and bool(field) and "." not in field


def main(argv: list[str] | None = None) -> int:
    """`python -m verl_cua.doctor.preflight --gpus N --model PATH [...] [-- HYDRA OVERRIDES]`: the checks a recipe
    runs before a slow step (a download, torchrun); 1 and a line per blocker, else 0."""
    parser = argparse.ArgumentParser(prog="verl-cua preflight", description=main.__doc__)
    parser.add_argument("--gpus", type=int, required=True, help="GPUs per node the run starts processes on")
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--tp", type=int, default=1, help="the rollout's tensor parallel size")
    parser.add_argument("--rollout", default="none", help="the rollout engine (vllm, sglang), checked as installed")
    parser.add_argument("--model", required=True, help="the model folder or hub name the run loads")
    parser.add_argument("--logger", default=None, help="trainer.logger as the recipe sets it ([console,wandb])")
    parser.add_argument("--host", default="verl", choices=("verl", "verl-agent"), help="whose trainer runs")
    parser.add_argument("--prog", default="verl-cua", help="the name the lines start with (the recipe's)")
    parser.add_argument("--tasks", default="", help="OSWorld TASKS (comma-separated): checked against this install")
    parser.add_argument("--provider", default=None, help="OSWorld's provider (docker: the daemon, KVM, VM image)")
    parser.add_argument("--vm-path", default=None, help="the docker provider's VM image (the recipe's VM_PATH)")
    parser.add_argument("--blocker", action="append", default=[],
                        help="a blocker found before this check (what the recipe's interpreter lacks): listed first, "
                        "counted with the others")  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="the recipe's appended Hydra overrides (after --)")
    args = parser.parse_args(argv)
    config = standalone_config(
        args.gpus, args.model, args.nnodes, args.tp, args.rollout, args.overrides, logger=args.logger
    )
    found = []
    if args.tasks and not skipped(config):
        from verl_cua.doctor.tasks import task_set_findings

        found += task_set_findings(args.tasks)  # a warning: the dataset step lists what it drops
    if args.provider == "docker" and not skipped(config):
        from verl_cua.doctor.system import docker_findings

        found += docker_findings(args.vm_path)  # a warning: no usable /dev/kvm
    for finding in found:
        if finding.level == "warn":
            print(f"{args.prog}: {finding.check}: {finding.detail}", file=sys.stderr)
    first = [Finding("FAIL", "python", line) for line in args.blocker]
    try:
        check_preflight(config, prog=args.prog, host=args.host, extra=[f for f in found if f.level == "FAIL"],
                        first=first)  # fmt: skip
    except PreflightError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
