"""CPU support for verl 0.9.1, through its public registries: a `cpu` platform, the FSDP2 engine for device `cpu`,
and an actor worker that starts its process group on gloo. For tests and the quickstart; production runs on GPUs."""
