"""verl 0.9.1 integration: plug-in registration, GUI agent loop, trainer, CPU support."""
