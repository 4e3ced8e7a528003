"""`python -m verl_cua.sft [overrides]`: verl's SFT trainer on `verl-cua sft-data` rows (verl_cua.integrations.verl)."""

import sys

from verl_cua.main import INSTALL, missing_packages


def main() -> None:
    """Check the ML stack is installed (one line naming the pip command if not), then run verl's SFT trainer."""
    missing = missing_packages()
    if missing:
        print(f"verl-cua sft: needs {', '.join(missing)}; install with: {INSTALL}", file=sys.stderr)
        sys.exit(2)
    from verl_cua.integrations.verl.sft_main import main as sft

    sft()


if __name__ == "__main__":
    main()
