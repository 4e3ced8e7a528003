"""`python -m verl_cua.sft_main`: verl's own SFT trainer on `verl-cua sft-data` rows (`main`), and LoRA checkpoints
merged into plain Hugging Face folders (`lora_merge`)."""
