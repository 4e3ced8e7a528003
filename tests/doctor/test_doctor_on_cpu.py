"""`verl-cua doctor` on this GPU-less machine: the real recipes composed (run with a recording python, nothing
installed or trained), the real system checks; a fake `nvidia-smi` stands in for a GPU driver (named so)."""

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verl_cua.doctor import run_doctor

ROOT = Path(__file__).resolve().parents[2]
FLAGSHIP = str(ROOT / "recipes" / "run_qwen3vl_sdpo_osworld.sh")
CPU_RECIPE = str(ROOT / "recipes" / "run_tiny_grpo_miniwob_cpu.sh")
LINE = re.compile(r"^(ok|info|warn|FAIL) +[\w -]+: \S")


def _doctor(*args):
    out = io.StringIO()
    code = run_doctor(args[0] if args else None, list(args[1:]), out=out)
    lines = out.getvalue().splitlines()
    assert all(LINE.match(line) for line in lines), lines
    return code, {line.split(":")[0].split(None, 1)[1]: line for line in lines}


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    """A fake `nvidia-smi` first on PATH answering like an H100 with the driver version given."""

    def install(driver):
        exe = tmp_path / "nvidia-smi"
        exe.write_text(f"#!/bin/sh\necho '0, GPU-0-fake, NVIDIA H100 80GB HBM3, {driver}, 81559 MiB'\n")
        exe.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")

    return install


def test_the_flagship_on_this_machine_lists_its_blockers_and_budgets():
    code, found = _doctor(FLAGSHIP)
    assert code == 1
    assert found["gpu"].startswith("FAIL") and found["vllm"].startswith("FAIL") and "[vllm]" in found["vllm"]
    assert found["verl"].startswith("ok") and found["recipe"].startswith("ok")
    assert "943 tokens" in found["tokens"] and "rows=step" in found["tokens"]
    assert "1920 rows" in found["host memory"] and "as png" in found["host memory"]
    assert "9216" in found["max_model_len"]
    assert found["memory"].startswith("FAIL")  # 32 docker desktops x 4 GB do not fit 24 GB
    assert found["doctor"].startswith("FAIL")


def test_a_budget_that_cannot_hold_the_episode_is_a_blocker_named_in_one_line():
    code, found = _doctor(FLAGSHIP, "cua.env.rows=episode")
    assert code == 1 and "cannot hold two turns" in found["config"] and found["config"].startswith("FAIL")


def test_the_cpu_recipe_needs_no_gpu_and_passes_here():
    code, found = _doctor(CPU_RECIPE)
    assert found["gpu"].startswith("info") and "vllm" not in found and found["flash-attn"].startswith("info")
    assert found["recipe"].startswith("ok") and "hf rollout" in found["recipe"]
    assert code == 0, found


def test_parked_miniwob_browsers_count_in_the_memory_check():
    # the pool keeps cua.env.idle_envs browsers loaded for other tasks beside its pool_size ones
    _code, found = _doctor(CPU_RECIPE)
    assert ": 4 miniwob desktops x 0.4 GB" in found["memory"], found["memory"]
    _code, found = _doctor(CPU_RECIPE, "cua.env.idle_envs=0")
    assert ": 2 miniwob desktops x 0.4 GB" in found["memory"], found["memory"]


def test_a_driver_too_old_for_torchs_cuda_is_a_blocker(fake_nvidia_smi):
    import torch

    if not (torch.version.cuda or "").startswith("13"):
        pytest.skip("this torch is not a CUDA 13 build")
    fake_nvidia_smi("550.54.15")
    code, found = _doctor()
    assert code == 1 and found["driver"].startswith("FAIL") and "580" in found["driver"]
    fake_nvidia_smi("580.159.04")
    code, found = _doctor()
    assert "driver" not in found and found["gpu"].startswith("ok") and "H100" in found["gpu"]


def test_the_command_line_exits_non_zero_on_a_blocker():
    proc = subprocess.run([sys.executable, "-m", "verl_cua.cli", "doctor", FLAGSHIP], capture_output=True, text=True)
    assert proc.returncode == 1 and "FAIL  doctor:" in proc.stdout


def test_a_local_desktop_recipe_names_missing_apps_of_osworlds_image(local_desktop, monkeypatch):
    from verl_cua.envs.osworld import local_desktop as ld

    monkeypatch.setenv("PROVIDER", "local")  # the flagship's knob for OSWorld's provider
    args = (FLAGSHIP,)
    code, found = _doctor(*args)
    assert found["desktop apps"].startswith("ok") and "docker" not in found
    real = ld.shutil.which
    monkeypatch.setattr(ld.shutil, "which", lambda name: None if name in ("vlc", "gimp") else real(name))
    code, found = _doctor(*args)
    assert found["desktop apps"].startswith("warn") and "gimp vlc missing" in found["desktop apps"]


def test_the_desktops_counted_and_their_cost_come_from_the_envs_spec(scratch_env):
    from verl_cua.doctor.system import desktop_demand
    from verl_cua.envs import DesktopCost, EnvSpec

    assert desktop_demand("miniwob", {}, 2, 2, 3) == ("miniwob", 12, DesktopCost(0.4, 0.5))  # idle browsers count
    assert desktop_demand("osworld", {}, 4, 2, 2) == ("local", 8, DesktopCost(0.6, 0.5))  # the env's own default
    assert desktop_demand("osworld", {"provider": "docker"}, 4, 2, 2) == ("docker", 8, DesktopCost(4.0, 4))
    vm = DesktopCost(8.0, 2)
    scratch_env("kiosk", EnvSpec(provider="vm", provider_desktops={"vm": vm}, keeps_idle=True))
    assert desktop_demand("kiosk", {}, 1, 3, 2) == ("vm", 8, vm)
    assert desktop_demand("kiosk", {"provider": "thin"}, 1, 0, 1) == ("thin", 1, DesktopCost(0.6, 0.5))
    scratch_env("bare")  # no spec: a host desktop each, idle envs not kept, no provider even if kwargs name one
    assert desktop_demand("bare", {"provider": "docker"}, 2, 5, 1) == ("bare", 2, DesktopCost(0.6, 0.5))
