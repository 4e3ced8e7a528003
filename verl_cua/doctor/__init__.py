"""`verl-cua doctor [RECIPE]`: what stands between this machine and a training run, one line per finding.

Checks the GPU driver and CUDA, torch / vLLM (or SGLang) / flash-attn / transformers / verl versions against the pins
verl 0.9.1 is tested with, Docker and /dev/kvm for OSWorld's docker provider, disk for the VM image, RAM and cores
for the desktops the recipe starts, and prints the recipe's per-row token budget and host memory per step. Exit 1
when a finding blocks the run (FAIL), else 0."""

from verl_cua.doctor.finding import Finding
from verl_cua.doctor.report import run_doctor

__all__ = ["Finding", "run_doctor"]
