"""Hydra configs: cua_trainer.yaml (verl ppo_trainer + cua group)."""
