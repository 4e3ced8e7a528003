"""The GPUs a run asks for (`trainer.nnodes` x `trainer.n_gpus_per_node`, the rollout's tensor parallelism) against
the GPUs this machine shows (nvidia-smi, narrowed by CUDA_VISIBLE_DEVICES as CUDA and Ray narrow them)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from verl_cua.doctor.finding import Finding
from verl_cua.integrations.verl.config.budget import SERVED_ROLLOUTS

MIN_DRIVER_CUDA13 = 580  # CUDA 13 (torch 2.11's PyPI wheels) needs an R580+ driver


@dataclass(frozen=True)
class Gpus:
    """What nvidia-smi reports: (name, driver, memory) per GPU, narrowed to the visible ones; `error` if it failed."""

    rows: tuple[tuple[str, str, str], ...] = ()
    error: str | None = None

    @property
    def count(self) -> int:
        """GPUs this process may use."""
        return len(self.rows)

    def describe(self) -> str:
        """`2 x NVIDIA H100 (81559 MiB), driver 580.1`, or why there are none."""
        if self.error or not self.rows:
            return self.error or "no GPU"
        name, driver, memory = self.rows[0]
        return f"{self.count} x {name} ({memory}), driver {driver}"


def visible_gpus() -> Gpus:
    """The GPUs nvidia-smi lists, narrowed as CUDA narrows them when CUDA_VISIBLE_DEVICES is set: entries by index,
    GPU UUID (or its prefix) or MIG UUID, up to the first entry CUDA could not use."""
    smi = shutil.which("nvidia-smi") or "nvidia-smi"
    query = [smi, "--query-gpu=index,uuid,name,driver_version,memory.total", "--format=csv,noheader"]
    try:
        lines = subprocess.run(query, capture_output=True, text=True, timeout=20, check=True).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return Gpus(error="no NVIDIA driver answers (nvidia-smi missing or failing)")
    fields = [(line.split(", ") + ["?"] * 5)[:5] for line in lines if line.strip()]
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    if shown is None:
        return Gpus(rows=tuple((f[2], f[3], f[4]) for f in fields), error=None if fields else "nvidia-smi lists no GPU")
    kept = []
    for entry in (part.strip() for part in shown.split(",")):
        match = [f for f in fields if entry == f[0] or (entry.startswith("GPU-") and f[1].startswith(entry))]
        if entry.startswith("MIG-") and fields:  # a MIG instance of one of the GPUs listed
            match = [(fields[0][0], entry, f"MIG instance of {fields[0][2]}", fields[0][3], "?")]
        if match and any(k[1] == match[0][1] for k in kept):  # CUDA refuses a list naming a GPU twice
            return Gpus(error=f"CUDA_VISIBLE_DEVICES={shown!r} names a GPU twice, and CUDA then shows none")
        if not match:  # CUDA stops at the first unusable entry
            break
        kept.append(match[0])
    error = None if kept else f"CUDA_VISIBLE_DEVICES={shown!r} leaves no GPU of the {len(fields)} listed"
    return Gpus(rows=tuple((f[2], f[3], f[4]) for f in kept), error=error)


def gpu_findings(config: dict[str, Any] | None, gpus: Gpus) -> list[Finding]:
    """The `gpu` finding (what the run needs against what is here) and the driver's fitness for torch's CUDA."""
    device = (config or {}).get("trainer", {}).get("device", "cuda")
    if config is not None and device == "cuda":
        out = [_need(config, gpus), *_tensor_parallel(config)]
    elif config is not None and device != "cpu":  # another accelerator (npu, ...): nvidia-smi cannot count it
        out = [Finding("info", "gpu", f"trainer.device={device}: not counted here")]
    else:
        out = [Finding("info" if gpus.error or device == "cpu" else "ok", "gpu", gpus.describe())]
    if gpus.rows:
        driver = gpus.rows[0][1]
        cuda = torch_cuda()
        major = int(driver.split(".")[0]) if driver.split(".")[0].isdigit() else 0
        if cuda and cuda.startswith("13") and major < MIN_DRIVER_CUDA13:
            out.append(Finding("FAIL", "driver", f"torch is built for CUDA {cuda}, which needs driver >= "
                                                 f"{MIN_DRIVER_CUDA13}; this one is {driver}"))  # fmt: skip
    return out


def _need(config: dict[str, Any], gpus: Gpus) -> Finding:
    trainer = config.get("trainer") or {}
    nnodes, per_node = int(trainer.get("nnodes") or 1), int(trainer.get("n_gpus_per_node") or 1)
    asked = f"trainer.nnodes={nnodes} x trainer.n_gpus_per_node={per_node}"
    found = gpus.describe()
    if _torch_hip():
        return Finding("info", "gpu", f"the run needs {_gpus(nnodes * per_node)} ({asked}); ROCm GPUs are not counted "
                                      "here")  # fmt: skip
    if _external_cluster(config):
        return Finding("info", "gpu", f"the run needs {_gpus(nnodes * per_node)} ({asked}) on the Ray cluster it "
                                      f"joins; this machine: {found}")  # fmt: skip
    if gpus.count >= per_node:
        return Finding("ok", "gpu", f"the run needs {_gpus(per_node)} on this node ({asked}); {found}")
    if nnodes > 1:  # the driver may run on a node without GPUs; Ray's bounded wait judges the cluster
        return Finding("warn", "gpu", f"the run needs {_gpus(nnodes * per_node)} ({asked}) across its nodes; this "
                                      f"one has {gpus.count}: {found}")  # fmt: skip
    fix = f"; set N_GPUS_PER_NODE={gpus.count} (trainer.n_gpus_per_node)" if gpus.count else ""
    return Finding("FAIL", "gpu", f"the run needs {_gpus(per_node)} ({asked}) on this machine; found "
                                  f"{gpus.count}: {found}{fix}")  # fmt: skip


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _tensor_parallel(config: dict[str, Any]) -> list[Finding]:
    rollout = config.get("actor_rollout_ref", {}).get("rollout", {})
    if rollout.get("name") not in SERVED_ROLLOUTS:
        return []
    trainer = config.get("trainer") or {}
    total = int(trainer.get("nnodes") or 1) * int(trainer.get("n_gpus_per_node") or 1)
    replica = 1
    for key in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size"):
        replica *= int(rollout.get(key) or 1)
    if replica <= total and total % replica == 0:
        return []
    return [Finding("FAIL", "rollout gpus", f"a {rollout['name']} replica takes {_gpus(replica)} (tensor x data x "
                                            f"pipeline parallel; TP in the recipes), which does not divide the "
                                            f"run's {total}; set TP to a divisor of {total}")]  # fmt: skip


def _external_cluster(config: dict[str, Any]) -> bool:
    """Whether the run joins a Ray cluster started elsewhere (whose GPUs this machine cannot count): an address
    in the config or RAY_ADDRESS, or, as `ray.init()` finds it, a cluster `ray start` left running on this machine."""
    address = ((config.get("ray_kwargs") or {}).get("ray_init") or {}).get("address") or os.environ.get("RAY_ADDRESS")
    if address:
        return address != "local"
    current = os.path.join(os.environ.get("RAY_TMPDIR") or "/tmp/ray", "ray_current_cluster")
    return os.path.isfile(current) and os.path.getsize(current) > 0


def _torch_version(field: str) -> str | None:
    """`torch.version.<field>` (cuda, hip), or None without torch."""
    try:
        import torch
    except Exception:
        return None
    return getattr(torch.version, field, None)


def _torch_hip() -> bool:
    return bool(_torch_version("hip"))


def torch_cuda() -> str | None:
    """The CUDA version torch is built for (None: no torch or a CPU build)."""
    return _torch_version("cuda")
