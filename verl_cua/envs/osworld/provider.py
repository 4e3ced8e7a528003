"""The `local` provider for OSWorld's DesktopEnv: a LocalDesktop behind OSWorld's Provider/VMManager interface.

DesktopEnv builds its provider through `desktop_env.desktop_env.create_vm_manager_and_provider` and accepts
only its own provider names. `desktop_env_with_provider` makes a DesktopEnv whose provider is ours, with
OSWorld's "docker" semantics (a fresh desktop at start, revert after use); the injection is thread-local, so
envs built concurrently in other threads get OSWorld's own providers unchanged.
"""

from __future__ import annotations

import threading
from typing import Any

from desktop_env.providers.base import Provider, VMManager

from verl_cua.envs.osworld.local_desktop import LocalDesktop

LOCAL_VM_PATH = "verl-cua-local-desktop"
_injected = threading.local()
_patch_lock = threading.Lock()


class LocalVMManager(VMManager):
    """Nothing to register or download: every local desktop is built on demand."""

    def initialize_registry(self, **kwargs):
        """No registry file."""

    def add_vm(self, vm_path, **kwargs):
        """Nothing to record."""

    def delete_vm(self, vm_path, **kwargs):
        """Nothing to record."""

    def occupy_vm(self, vm_path, pid, **kwargs):
        """Nothing to record."""

    def list_free_vms(self, **kwargs):
        """One virtual path."""
        return [LOCAL_VM_PATH]

    def check_and_clean(self, **kwargs):
        """Nothing to clean."""

    def get_vm_path(self, **kwargs):
        """The fixed virtual path."""
        return LOCAL_VM_PATH


class LocalProvider(Provider):
    """OSWorld provider over a LocalDesktop: start, address, revert (a new sandbox), stop."""

    def __init__(self, desktop: LocalDesktop):
        super().__init__(region=None)
        self.desktop = desktop

    def start_emulator(self, path_to_vm: str, headless: bool, *args, **kwargs):
        """Boot the desktop unless it already runs."""
        if not self.desktop.healthy():
            self.desktop.start()

    def get_ip_address(self, path_to_vm: str) -> str:
        """`ip:server:cdp:vnc:vlc`."""
        return self.desktop.address

    def save_state(self, path_to_vm: str, snapshot_name: str):
        """Snapshots are not supported: the pristine state is the HOME template."""
        raise NotImplementedError("the local desktop has no snapshots; its pristine state is the HOME template")

    def revert_to_snapshot(self, path_to_vm: str, snapshot_name: str):
        """End the episode's sandbox and take a fresh one (DesktopEnv then reads its new address); the path is
        unchanged."""
        self.desktop.revert()
        return path_to_vm

    def stop_emulator(self, path_to_vm: str, *args, **kwargs):
        """Kill the desktop's process tree."""
        self.desktop.stop()


def _dispatch(original):
    def create_vm_manager_and_provider(provider_name: str, region: str, use_proxy: bool = False):
        pending = getattr(_injected, "pair", None)
        if pending is not None:
            _injected.pair = None
            return pending
        return original(provider_name, region, use_proxy=use_proxy)

    create_vm_manager_and_provider.__verl_cua_dispatch__ = True
    return create_vm_manager_and_provider


def desktop_env_with_provider(manager: VMManager, provider: Provider, **kwargs: Any):
    """A DesktopEnv whose manager/provider are the given ones (OSWorld's docker semantics)."""
    import desktop_env.desktop_env as de

    with _patch_lock:
        if not getattr(de.create_vm_manager_and_provider, "__verl_cua_dispatch__", False):
            de.create_vm_manager_and_provider = _dispatch(de.create_vm_manager_and_provider)
    _injected.pair = (manager, provider)
    try:
        return de.DesktopEnv(provider_name="docker", **kwargs)
    finally:
        _injected.pair = None
