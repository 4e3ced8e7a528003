"""`python -m verl_cua.main`: the trainer entry point (see verl_cua.integrations.verl.main)."""

from verl_cua.integrations.verl.main import main

if __name__ == "__main__":
    main()
