"""`python -m verl_cua.sft`: verl 0.9.1's own SFT trainer (`SFTTrainer`, FSDP2, multi-turn and multi-image rows)
with verl-cua's config (`config/sft/cua_sft.yaml`) and platforms: on the CPU (`preset=cpu`) its process group
is gloo alone. One process runs without torchrun; several GPUs run under `torchrun --nproc_per_node N -m verl_cua.sft`.
"""

from __future__ import annotations

import os
import socket
import sys

import hydra
from omegaconf import DictConfig


def _single_process_env() -> None:
    """torchrun's variables for a run without torchrun (one process, a free local port)."""
    if "RANK" in os.environ:
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


def _init_process_group(device: str) -> None:
    """verl's process group; on the CPU gloo alone (verl asks for `cpu:gloo,cpu:gloo`, which torch rejects)."""
    if device == "cpu":
        from verl_cua.integrations.verl.cpu.workers import init_gloo_process_group

        init_gloo_process_group()
    else:
        from verl.utils.distributed import initialize_global_process_group

        initialize_global_process_group()


def run(config: DictConfig) -> None:
    """Train with verl's `SFTTrainer` as verl's `run_sft` does, on the platform `trainer.device` names."""
    from verl.trainer.sft_trainer import SFTTrainer
    from verl.utils.device import auto_set_device
    from verl.utils.distributed import destroy_global_process_group

    if config.trainer.device == "cpu":
        os.environ.setdefault("VERL_PLATFORM", "cpu")
    auto_set_device(config)
    _single_process_env()
    _init_process_group(config.trainer.device)
    try:
        SFTTrainer(config=config).fit()
    finally:
        destroy_global_process_group()


@hydra.main(config_path="config/sft", config_name="cua_sft", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point."""
    try:
        run(config)
    except (ValueError, FileNotFoundError) as exc:
        print(f"verl-cua sft: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
