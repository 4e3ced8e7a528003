"""The `cpu` platform: gloo collectives, device `cpu`, Ray CPU slots instead of GPUs (`VERL_PLATFORM=cpu`)."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

from verl_cua.integrations.verl.cpu.device import build_device_module

_DEVICE_MODULE: ModuleType | None = None
_ACCELERATOR_TOOLS = ("nvidia-smi", "npu-smi", "rocm-smi", "amd-smi")


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl on the CPU. Picked by `VERL_PLATFORM=cpu`, or by auto-detection when no accelerator is present."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        global _DEVICE_MODULE
        if _DEVICE_MODULE is None:
            _DEVICE_MODULE = build_device_module()
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        """Auto-detected only on hosts with no accelerator at all (verl probes the GPU platforms first)."""
        if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu":
            return True
        if any(shutil.which(tool) for tool in _ACCELERATOR_TOOLS):
            return False
        try:
            return torch.cuda.device_count() == 0
        except Exception:
            return True

    def current_device(self) -> str:  # verl does `.to(get_device_id())`
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        """Ray forbids "CPU" under `resources`; a worker's device share becomes CPU slots."""
        return {"num_cpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def rollout_env_vars(self) -> dict[str, str]:
        """For a vLLM-CPU rollout server: its KV cache in GiB (vLLM's CPU default, 4, is more than tiny models need)."""
        return {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
