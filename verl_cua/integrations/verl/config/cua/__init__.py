"""The cua config group."""
