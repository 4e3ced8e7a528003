"""`python -m verl_cua.sft_main [overrides]`: verl's SFT trainer on `verl-cua sft-data` rows, an entry point beside
`verl_cua.main` (the trainer lives in verl_cua.integrations.verl.sft)."""

import sys

from verl_cua.main import require_ml_stack

RERUN = "rerun the same command to start again"


def main() -> None:
    """Check the ML stack is installed (one line naming the pip command if not), then run verl's SFT trainer; Ctrl-C
    is one line and exit 130, a closed stdout a quiet exit (`verl_cua.exits`)."""
    require_ml_stack("the SFT trainer")
    from verl_cua.exits import guarded
    from verl_cua.integrations.verl.sft.main import main as sft

    sys.exit(guarded(sft, lambda: f"verl-cua sft: stopped by Ctrl-C before training started; nothing kept; {RERUN}"))


if __name__ == "__main__":
    main()
