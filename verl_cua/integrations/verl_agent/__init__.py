"""verl-agent adapter: environment manager and install hooks (issue 7)."""
