"""`python -m verl_cua.sft_main [overrides]`: verl's SFT trainer on `verl-cua sft-data` rows, an entry point beside
`verl_cua.main` (the trainer lives in verl_cua.integrations.verl.sft)."""

from verl_cua.main import require_ml_stack


def main() -> None:
    """Check the ML stack is installed (one line naming the pip command if not), then run verl's SFT trainer."""
    require_ml_stack("the SFT trainer")
    from verl_cua.integrations.verl.sft.main import main as sft

    sft()


if __name__ == "__main__":
    main()
