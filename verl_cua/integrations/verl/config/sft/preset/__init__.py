"""SFT presets selected with preset=<name> (preset=cpu)."""
