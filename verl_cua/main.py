"""`python -m verl_cua.main`: the trainer entry point (see verl_cua.integrations.verl.main). `--help` lists every
`cua.*` key (from the dataclasses of cua_schema, no ML stack needed), then Hydra's own help when verl is installed."""

import importlib.util
import sys
from pathlib import Path

REQUIRED = {"verl": "verl", "hydra": "hydra-core", "torch": "torch", "torchvision": "torchvision"}
INSTALL = "pip install 'verl-cua[verl]'"
CHECKOUT_CONSTRAINTS = Path(__file__).resolve().parent.parent / "tests" / "constraints.txt"
CHECKOUT_INSTALL = "pip install -c tests/constraints.txt torch==2.14.1 torchvision==0.29.1 -e '.[verl]'"
HELP_FLAGS = ("--help", "-h")


def install_hint() -> str:
    """The pip command that installs the trainer's stack; in a source checkout, its pinned form too."""
    if CHECKOUT_CONSTRAINTS.is_file():
        return f"{INSTALL} (in this checkout: {CHECKOUT_INSTALL})"
    return INSTALL


def missing_packages() -> list[str]:
    """The trainer's packages that are not installed (pip names)."""
    missing = []
    for module, dist in REQUIRED.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(dist)
    return missing


def require_ml_stack(what: str) -> None:
    """Exit 2 with one line naming the pip command when the ML stack `what` needs is not installed."""
    missing = missing_packages()
    if missing:
        print(f"verl-cua: {what} needs {', '.join(missing)}; install with: {install_hint()}", file=sys.stderr)
        sys.exit(2)


def print_help() -> None:
    """Every `cua.*` key with its default, valid values and meaning; Hydra's help follows when verl is installed."""
    from verl_cua.integrations.verl.config.docs import listing

    print("python -m verl_cua.main [HYDRA OVERRIDES]: train a GUI agent with verl (config cua_trainer).\n")
    print(listing())
    missing = missing_packages()
    if missing:
        print(f"Hydra's help (every trainer key) needs {', '.join(missing)}; install with: {install_hint()}")
        sys.exit(0)
    print("Hydra's help follows (verl's trainer keys under == Config ==).\n", flush=True)


def main() -> None:
    """Check the ML stack is installed (one line naming the pip command if not), then run the trainer."""
    if any(arg in HELP_FLAGS for arg in sys.argv[1:]):
        print_help()
    require_ml_stack("the trainer")
    from verl_cua.integrations.verl.main import main as train

    train()


if __name__ == "__main__":
    main()
