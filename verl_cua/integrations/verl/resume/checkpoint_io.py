"""Our state's files inside verl's `global_step_N` folder: written into a temporary folder and renamed into place
(a kill during the save leaves the old folder or none, never half of one), a manifest with a format version and
each file's sha256 written last, checked on load; the content digest that names what was saved and restored."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT_VERSION = 1
STATE_DIR = "cua"
MANIFEST = "manifest.json"
STATE_FILE = "state.pt"
EMA_DIR = "cua_ema"  # inside verl's actor folder, so it lives and dies with verl's actor checkpoint


class CheckpointStateError(RuntimeError):
    """Our state in a checkpoint cannot be used (corrupt, from a newer verl-cua, or saved with other settings)."""


def content_digest(value: Any) -> str:
    """sha256 of a nested value (dicts by key, lists, tensors by dtype/shape/bytes, arrays, scalars, text)."""
    h = hashlib.sha256()
    _feed(h, value)
    return h.hexdigest()


def _feed(h, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, np.ndarray):
        h.update(f"A{value.dtype}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, Mapping):
        h.update(f"D{len(value)}".encode())
        for key in sorted(value, key=str):
            _feed(h, str(key))
            _feed(h, value[key])
    elif isinstance(value, list | tuple):
        h.update(f"L{len(value)}".encode())
        for item in value:
            _feed(h, item)
    elif isinstance(value, bytes | bytearray):
        h.update(b"B%d:" % len(value))
        h.update(bytes(value))
    else:
        text = repr(value.item() if isinstance(value, np.generic) else value)
        h.update(f"S{len(text)}:{text}".encode())


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_tensor_file(value: Any, path: Path) -> int:
    """torch.save `value` to `path` atomically (a temporary file in the same folder, fsync, rename); its bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(value, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # as an ordinary file, like verl's (mkstemp makes it owner-only)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path.stat().st_size


def load_tensor_file(path: Path) -> Any:
    """torch.load with weights_only (tensors and plain Python values; nothing a pickle could run)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def write_state_dir(step_folder: str | Path, state: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict:
    """Write `state` as `<step_folder>/cua/` (state.pt + manifest.json), atomically as a folder; the manifest."""
    step_folder = Path(step_folder)
    step_folder.mkdir(parents=True, exist_ok=True)
    for stale in step_folder.glob(f".{STATE_DIR}.*"):  # what a save killed midway left behind
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{STATE_DIR}.", suffix=".tmp", dir=step_folder))
    try:
        size = save_tensor_file(dict(state), tmp / STATE_FILE)
        full = {
            **manifest,
            "format_version": FORMAT_VERSION,
            "saved_at": time.time(),
            "files": {STATE_FILE: {"bytes": size, "sha256": _sha256_file(tmp / STATE_FILE)}},
        }
        (tmp / MANIFEST).write_text(json.dumps(full, indent=1, sort_keys=True, default=str))
        with open(tmp / MANIFEST, "rb") as f:
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        final = step_folder / STATE_DIR
        old = None
        if final.exists():  # the same step saved again (a resumed run re-ran it): swap, then drop the old one
            old = step_folder / f".{STATE_DIR}.old-{os.getpid()}"
            os.replace(final, old)
        os.replace(tmp, final)
        _fsync_dir(step_folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return full
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_manifest(step_folder: str | Path) -> dict | None:
    """The manifest of `<step_folder>/cua/`, None when the folder holds no state of ours."""
    path = Path(step_folder) / STATE_DIR / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointStateError(f"{path} is unreadable ({exc})") from exc
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointStateError(
            f"{path} has format version {version!r}; this verl-cua reads up to {FORMAT_VERSION}: upgrade verl-cua"
        )
    return manifest


def read_state_dir(step_folder: str | Path) -> tuple[dict, dict] | None:
    """(state, manifest) of `<step_folder>/cua/`, every file checked against its sha256; None when absent."""
    manifest = read_manifest(step_folder)
    if manifest is None:
        return None
    folder = Path(step_folder) / STATE_DIR
    for name, meta in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file() or _sha256_file(path) != meta.get("sha256"):
            raise CheckpointStateError(f"{path} is missing or does not match its sha256 in {MANIFEST}: corrupt")
    return load_tensor_file(folder / STATE_FILE), manifest


def prune_orphans(checkpoint_root: str | Path) -> list[Path]:
    """Remove our state from `global_step_*` folders whose actor checkpoint verl removed (`max_actor_ckpt_to_keep`);
    the removed folders."""
    removed = []
    root = Path(checkpoint_root)
    if not root.is_dir():
        return removed
    for folder in root.glob("global_step_*"):
        ours = folder / STATE_DIR
        if ours.is_dir() and not (folder / "actor").exists():
            shutil.rmtree(ours, ignore_errors=True)
            removed.append(ours)
    return removed


def ema_shard_path(actor_folder: str | Path, rank: int) -> Path:
    """Where actor rank `rank` keeps its EMA teacher shard inside verl's actor checkpoint folder."""
    return Path(actor_folder) / EMA_DIR / f"rank_{rank}.pt"
