"""OSWorld's Ubuntu VM image for the docker provider, fetched to where the run looks for it:
`python -m verl_cua.envs.osworld.vm_image --vm-path PATH`.

desktop-env's `DockerVMManager.get_vm_path` downloads into its module constant `VMS_DIR` (`./docker_vm_data`)
whatever path the run names. We point that constant at `PATH`'s folder for the call (desktop-env reads it at call
time), name the unpacked image as `PATH` names it, and delete the ~12 GB zip it was unpacked from.
"""

from __future__ import annotations

import argparse
import sys
import threading
import zipfile
from pathlib import Path

_lock = threading.Lock()


class VMImageError(RuntimeError):
    """The image is not where the run looks for it after the download."""


def fetch_vm_image(vm_path: str | Path) -> Path:
    """`vm_path` itself if it exists, else desktop-env's Ubuntu image downloaded and unpacked into its folder."""
    target = Path(vm_path).expanduser().resolve()
    if target.is_file():
        return target
    from desktop_env.providers.docker import manager

    unpacked_before = (target.parent / "Ubuntu.qcow2").is_file()  # another config's image: never moved away
    with _lock:
        saved = manager.VMS_DIR
        manager.VMS_DIR = str(target.parent)
        try:
            got = Path(manager.DockerVMManager().get_vm_path("Ubuntu", None)).resolve()
        finally:
            manager.VMS_DIR = saved
        archive = target.parent / manager.DOWNLOADED_FILE_NAME
    if got.is_file() and archive.suffix == ".zip" and archive.is_file():
        archive.unlink()  # unpacked: the zip is ~12 GB of nothing
    if not target.is_file() and got.is_file() and got.parent == target.parent and not unpacked_before:
        got.rename(target)  # VM_PATH names the file otherwise than the archive's Ubuntu.qcow2
    if not target.is_file():
        raise VMImageError(f"desktop-env's image is {got}, not VM_PATH={target}: set VM_PATH={got}")
    return target


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: the image's path on stdout, or one line on stderr."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vm-path", required=True, help="where the run looks for the image (VM_PATH)")
    args = ap.parse_args(argv)
    try:
        print(fetch_vm_image(args.vm_path))
    except (VMImageError, ImportError, OSError, zipfile.BadZipFile) as exc:  # BadZipFile: a truncated download
        print(f"verl-cua vm image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
