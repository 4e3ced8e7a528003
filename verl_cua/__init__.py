"""verl-cua: train computer-use agents with verl and verl-agent. Importing this package is light (no torch)."""

__version__ = "0.1.0.dev0"
