"""`python -m verl_cua.main`: the trainer's entry point. The config is checked (verl's checks and ours, one line
each: `integrations.verl.launch`), then the machine (the doctor's preflight), then verl trains. `--help` lists every
`cua.*` key (from the dataclasses of `config.schema`, no ML stack needed), then Hydra's own help when verl is
installed. Entry points sit above every layer: this one may import the doctor, which imports the trainer's config."""

import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from verl_cua.resources import install_hint

REQUIRED = {"verl": "verl", "hydra": "hydra-core", "torch": "torch", "torchvision": "torchvision"}
HELP_FLAGS = ("--help", "-h")
CONFIG_DIR = Path(__file__).resolve().parent / "integrations" / "verl" / "config"  # Hydra's `cua_trainer`


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The `modules` Python cannot import (not installed, or blocked), in the order given; none is imported."""
    missing = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing


def missing_packages() -> list[str]:
    """The trainer's packages that are not installed (pip names)."""
    return [REQUIRED[module] for module in missing_modules(REQUIRED)]


def require_ml_stack(what: str) -> None:
    """Exit 2 with one line naming the pip command when the ML stack `what` needs is not installed."""
    missing = missing_packages()
    if missing:
        print(f"verl-cua: {what} needs {', '.join(missing)}; install with: {install_hint('verl')}", file=sys.stderr)
        sys.exit(2)


def print_help() -> None:
    """Every `cua.*` key with its default, valid values and meaning; Hydra's help follows when verl is installed."""
    from verl_cua.integrations.verl.config.docs import listing

    print("python -m verl_cua.main [HYDRA OVERRIDES]: train a GUI agent with verl (config cua_trainer).\n")
    print(listing())
    missing = missing_packages()
    if missing:
        print(f"Hydra's help (every trainer key) needs {', '.join(missing)}; install with: {install_hint('verl')}")
        sys.exit(0)
    print("Hydra's help follows (verl's trainer keys under == Config ==).\n", flush=True)


def check_overrides(args: list[str], prog: str = "verl-cua", sections: tuple[str, ...] | None = None) -> None:
    """Exit 2 with one line naming the closest valid keys when an override names a `cua.*` key the schema lacks
    (before Hydra, whose refusal is 7 lines advising `+`)."""
    from verl_cua.integrations.verl.config.fields import CuaConfigError
    from verl_cua.integrations.verl.config.overrides import check_cua_overrides

    try:
        check_cua_overrides(args, sections)
    except CuaConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    """Check the ML stack is installed (one line naming the pip command if not) and the `cua.*` keys named, then run
    the trainer; Ctrl-C is one line and exit 130, a closed stdout a quiet exit (`verl_cua.exits`)."""
    from verl_cua.exits import guarded

    if any(arg in HELP_FLAGS for arg in sys.argv[1:]):
        status = guarded(print_help, lambda: "verl-cua: stopped by Ctrl-C; nothing kept")  # Hydra's help next
        if status:
            sys.exit(status)
    require_ml_stack("the trainer")
    check_overrides(sys.argv[1:])
    import hydra

    train = hydra.main(config_path=str(CONFIG_DIR), config_name="cua_trainer", version_base=None)(run_or_exit)
    sys.exit(guarded(train, lambda: "verl-cua: stopped by Ctrl-C before training started; nothing kept; rerun the "
                                    "same command to start again"))  # fmt: skip


def run(config: Any) -> None:
    """Check the composed trainer config (one-line `CuaConfigError`s), then the machine (the preflight, before Ray
    starts), then train with verl's `run_ppo`."""
    from verl_cua.doctor.preflight import check_preflight
    from verl_cua.integrations.verl.launch import checked_config, launch

    resolved = checked_config(config)
    check_preflight(resolved)  # the machine, once the config itself holds
    launch(config)


def stop_ray() -> bool:
    """Shut down the Ray this process started or joined, so that no worker's output follows our last line; whether
    one was running."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return False
    try:
        ray.shutdown()
    except Exception:  # a cluster already going down: nothing left to stop
        pass
    return True


def exit_interrupted(config: Any, prog: str = "verl-cua") -> None:
    """After Ctrl-C: Ray shut down, then one line (where the run stopped, its last saved checkpoint, how to go on
    from it), exit 130."""
    from verl_cua.exits import INTERRUPTED, interrupted, training_stopped

    interrupted()  # a second Ctrl-C ends the process at once
    started = stop_ray()
    try:
        trainer = config.get("trainer") or {}
    except Exception:  # an interpolation that does not resolve: the line without the checkpoint's folder
        trainer = {}
    print(training_stopped(prog, trainer, started=started), file=sys.stderr, flush=True)
    sys.exit(INTERRUPTED)


def run_or_exit(config: Any, prog: str = "verl-cua") -> None:
    """`run`, with a bad `cua.*` or trainer setting reported in one line (exit 2), and a machine that cannot run
    it (the preflight's blockers, a line each) or a Ray wait past its bound in one line (exit 1), not a traceback;
    Ctrl-C: one line naming the last saved checkpoint (exit 130); a closed stdout: a quiet exit (141)."""
    from verl_cua.doctor.preflight import PreflightError
    from verl_cua.exits import pipe_closed, stdout_closed
    from verl_cua.integrations.ray_wait import ResourceWaitError
    from verl_cua.integrations.verl.config.fields import CuaConfigError

    try:
        run(config)
    except KeyboardInterrupt:
        exit_interrupted(config, prog)
    except BrokenPipeError:
        if not stdout_closed():
            raise
        stop_ray()
        sys.exit(pipe_closed())
    except CuaConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        sys.exit(2)
    except PreflightError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    except ResourceWaitError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
