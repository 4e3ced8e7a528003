"""Presets selected with preset=<name> (e.g. preset=cpu)."""
