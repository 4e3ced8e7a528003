"""Our recipes as verl-recipe folders (`verl-cua recipe list`, `verl-cua recipe export NAME DIR`), and the stub run
that reads a recipe's trainer overrides without running anything (`record`)."""
