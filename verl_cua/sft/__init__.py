"""The SFT rung of the ladder: `verl-cua sft-data` (trajectories -> verl SFT rows) and `python -m verl_cua.sft_main`
(verl's own SFT trainer with verl-cua's config)."""
