"""`torch.cpu` with the `torch.cuda`-style calls verl makes on its device module (memory stats, streams, rng)."""

from __future__ import annotations

import types
from contextlib import nullcontext

import torch


def _zero(*_args, **_kwargs) -> int:
    return 0


def _noop(*_args, **_kwargs) -> None:
    return None


def _mem_get_info(*_args, **_kwargs) -> tuple[int, int]:
    """(free, total) bytes of host memory, as `torch.cuda.mem_get_info` reports device memory."""
    try:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.available), int(vm.total)
    except ImportError:
        return 0, 0


class _Event:
    """A no-op `torch.cuda.Event`: CPU work is synchronous."""

    def __init__(self, *_args, **_kwargs):
        pass

    def record(self, *_args, **_kwargs) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def wait(self, *_args, **_kwargs) -> None:
        return None

    def query(self) -> bool:
        return True


def build_device_module() -> types.ModuleType:
    """A module object that answers every `get_torch_device().<name>` verl 0.9.1 calls, on CPU."""
    mod = types.ModuleType("verl_cua_cpu_device")
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: "cpu"
    mod.set_device = _noop
    mod.synchronize = _noop
    mod.empty_cache = _noop
    mod.ipc_collect = _noop
    mod.set_per_process_memory_fraction = _noop
    mod.reset_peak_memory_stats = _noop
    mod.memory_allocated = _zero
    mod.memory_reserved = _zero
    mod.max_memory_allocated = _zero
    mod.max_memory_reserved = _zero
    mod.mem_get_info = _mem_get_info
    mod.get_device_name = lambda *_a, **_k: "CPU"
    mod.get_rng_state = lambda *_a, **_k: torch.get_rng_state()
    mod.set_rng_state = lambda state, *_a, **_k: torch.set_rng_state(state)
    mod.manual_seed = torch.manual_seed
    mod.manual_seed_all = torch.manual_seed
    mod.current_stream = lambda *_a, **_k: torch.cpu.current_stream()
    mod.stream = lambda *_a, **_k: nullcontext()
    mod.Stream = torch.cpu.Stream
    mod.Event = _Event
    return mod
