"""`python -m verl_cua.main`: the trainer entry point (see verl_cua.integrations.verl.main)."""

import importlib.util
import sys

REQUIRED = {"verl": "verl", "hydra": "hydra-core", "torch": "torch", "torchvision": "torchvision"}
INSTALL = "pip install -c tests/constraints.txt torch==2.14.1 torchvision==0.29.1 -e '.[verl]'"


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
        print(f"verl-cua: {what} needs {', '.join(missing)}; install with: {INSTALL}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    """Check the ML stack is installed (one line naming the pip command if not), then run the trainer."""
    require_ml_stack("the trainer")
    from verl_cua.integrations.verl.main import main as train

    train()


if __name__ == "__main__":
    main()
