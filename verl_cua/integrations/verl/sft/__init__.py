"""`python -m verl_cua.sft`: verl's own SFT trainer on `verl-cua sft-data` rows (`main`), and LoRA checkpoints merged
into plain Hugging Face folders (`lora_merge`)."""
