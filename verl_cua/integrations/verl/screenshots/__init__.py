"""`cua.env.image_storage`: screenshots in training rows as PNG bytes (`compact`), expanded once a step per rank
(`cache`) by the FSDP engine that registers for them (`engine`), and prompt tokens built from their grids
(`grid_prompts`)."""
