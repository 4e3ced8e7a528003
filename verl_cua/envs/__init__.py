"""Desktops: OSWorld providers, the local X desktop, MiniWoB++ and the env pool (issue 3)."""
