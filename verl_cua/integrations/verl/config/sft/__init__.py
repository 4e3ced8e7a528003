"""verl-cua SFT configs: cua_sft.yaml (verl sft_trainer_engine + the columns of `verl-cua sft-data`)."""
