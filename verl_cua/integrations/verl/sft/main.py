"""`python -m verl_cua.sft_main`: verl 0.9.1's own SFT trainer (`SFTTrainer`, FSDP2, multi-turn and multi-image rows)
with verl-cua's config (`config/sft/cua_sft.yaml`) and platforms: on the CPU (`preset=cpu`) its process group
is gloo alone. One process runs without torchrun; several GPUs run under
`torchrun --nproc_per_node N -m verl_cua.sft_main`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

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


def check_data(config: DictConfig) -> None:
    """The SFT files exist (one line naming `verl-cua sft-data` otherwise), before any process group starts."""
    for key in ("train_files", "val_files"):
        files = config.data.get(key)
        for path in [files] if isinstance(files, str) else list(files or []):
            if "://" not in str(path) and not os.path.exists(os.path.expanduser(str(path))):
                raise FileNotFoundError(f"data.{key}: {path} does not exist; build it with `verl-cua sft-data RUN ...`")


def run(config: DictConfig) -> None:
    """Train with verl's `SFTTrainer` as verl's `run_sft` does, on the platform `trainer.device` names."""
    from verl.trainer.sft_trainer import SFTTrainer
    from verl.utils.device import auto_set_device
    from verl.utils.distributed import destroy_global_process_group

    check_data(config)
    if config.trainer.device == "cpu":
        os.environ.setdefault("VERL_PLATFORM", "cpu")
    auto_set_device(config)
    _single_process_env()
    _init_process_group(config.trainer.device)
    try:
        SFTTrainer(config=config).fit()
        if int(os.environ.get("RANK", "0")) == 0:
            keep_base_dtype(config.model.path, config.trainer.default_local_dir)
            if int(config.model.get("lora_rank") or 0) > 0:
                from verl_cua.integrations.verl.sft.lora_merge import merge_lora_checkpoints

                merge_lora_checkpoints(config.trainer.default_local_dir)
    finally:
        destroy_global_process_group()


DTYPE_KEYS = ("dtype", "torch_dtype")


def keep_base_dtype(base: str, ckpt_dir: str) -> int:
    """verl 0.9.1 writes `bfloat16` into every saved Hugging Face config whatever the weights are; write the base
    model's dtype back (a float32 model stays float32, a bfloat16 one is untouched). Returns the configs changed."""
    base_config = Path(os.path.expanduser(base)) / "config.json"
    if not base_config.is_file():  # a hub name: its dtype is the one verl writes (bfloat16) for every model we ship
        return 0
    want = json.loads(base_config.read_text())
    changed = 0
    for path in Path(ckpt_dir).glob("global_step_*/huggingface/config.json"):
        saved = json.loads(path.read_text())
        if _copy_dtypes(want, saved):
            path.write_text(json.dumps(saved, indent=2) + "\n")
            changed += 1
    return changed


def _copy_dtypes(src: dict, dst: dict) -> bool:
    """Copy the dtype keys of `src` (and of its nested configs) onto `dst`; True when something changed."""
    changed = False
    for key, value in src.items():
        if key in DTYPE_KEYS and dst.get(key, value) != value:
            dst[key], changed = value, True
        elif isinstance(value, dict) and isinstance(dst.get(key), dict):
            changed |= _copy_dtypes(value, dst[key])
    return changed


def exit_interrupted(config: DictConfig) -> None:
    """After Ctrl-C: one line from rank 0 (where training stopped, its last saved checkpoint, how to go on), exit
    130 on every rank."""
    from verl_cua.exits import INTERRUPTED, interrupted, training_stopped

    interrupted()  # a second Ctrl-C ends the process at once
    if int(os.environ.get("RANK", "0")) == 0:
        import torch.distributed as dist

        started = dist.is_available() and dist.is_initialized()
        print(training_stopped("verl-cua sft", config.get("trainer") or {}, started=started), file=sys.stderr)
    sys.exit(INTERRUPTED)


@hydra.main(config_path="../config/sft", config_name="cua_sft", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point."""
    try:
        run(config)
    except KeyboardInterrupt:
        exit_interrupted(config)
    except (ValueError, FileNotFoundError) as exc:
        print(f"verl-cua sft: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
