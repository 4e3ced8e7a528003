"""A recipe's trainer config as one YAML on verl's `ppo_trainer` alone: `cua_trainer.yaml`'s own values, its config
groups (`cua`, `preset`) as selected, then the recipe's overrides at the recipe's defaults, folded in as values."""

from __future__ import annotations

import importlib.resources
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from verl_cua.recipe_export.catalog import RecipeExportError, recipes_dir
from verl_cua.recipe_export.plain_config import Override, PlainConfigError, load_yaml, merge, parse_override, update
from verl_cua.recipe_export.record import main_overrides, record_calls, write_stubs

CONFIG_PACKAGE = "verl_cua.integrations.verl.config"
TRAINER = "cua_trainer"
VERL_SEARCHPATH = "pkg://verl.trainer.config"
PATH_KEYS = ("train_files", "val_files", "dir", "default_local_dir", "path_to_vm")


def default_overrides(script: Path) -> tuple[list[str], set[str]]:
    """The Hydra overrides `script` hands to `python -m verl_cua.main` with every variable at its default (a copy of
    the recipes run in a scratch folder with recording stubs; nothing runs, installs or downloads), and the keys whose
    values were paths under that folder (made relative to it: the paths the recipe uses from where it runs)."""
    with tempfile.TemporaryDirectory(prefix="verl_cua_export_") as scratch:
        root = Path(scratch)
        shutil.copytree(recipes_dir(), root / "recipes", ignore=shutil.ignore_patterns("*.md", "__pycache__"))
        stubs = write_stubs(root / "stub")
        env = {  # nothing from this shell but PATH: the recipe's own defaults, not the caller's settings
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(root),
            "VENV": str(stubs.parent),  # the CPU recipes' $VENV/bin/python: the stub
            "VERL_CUA_COMPOSE_ONLY": "1",  # the OSWorld preflight only sets VM_ARGS
        }
        calls = record_calls(root / "recipes" / script.name, stubs, root, env=env)
        overrides, relative = [], set()
        for override in main_overrides(calls):
            key = override.split("=", 1)[0].lstrip("+~")
            for prefix in {f"{root}/", f"{root.resolve()}/"}:
                if prefix in override:
                    override = override.replace(prefix, "")
                    relative.add(key)
            overrides.append(override)
        return overrides, relative


def path_keys(overrides: list[str], relative: set[str]) -> list[str]:
    """The override keys that name files or folders (kept at the recipe's default paths in the exported config), and
    those the script fills in at run time (empty at the defaults, e.g. the CPU recipes' locally built model)."""
    pairs = [(key.lstrip("+~"), value) for key, value in (o.split("=", 1) for o in overrides)]
    return [k for k, v in pairs if k in relative or k.rsplit(".", 1)[-1] in PATH_KEYS or v == ""]


def _load(relative: str) -> tuple[dict[str, Any], str | None]:
    """One of our config files as plain data, and its `# @package` header (None when it has none)."""
    resource = importlib.resources.files(CONFIG_PACKAGE).joinpath(relative)
    if not resource.is_file():
        raise RecipeExportError(f"no config {relative} in {CONFIG_PACKAGE}")
    text = resource.read_text()
    package = next((line.split("@package", 1)[1].strip() for line in text.splitlines()
                    if line.startswith("# @package")), None)  # fmt: skip
    return load_yaml(text) or {}, package


def _group(group: str, option: str) -> dict[str, Any]:
    """Config group `group`'s option, placed at its package (the group's name unless `# @package` says otherwise)."""
    node, package = _load(f"{group}/{option}.yaml")
    if package == "_global_":
        return node
    placed: dict[str, Any] = {}
    update(placed, package or group, node)
    return placed


def _defaults(trainer: dict[str, Any]) -> list[tuple[str, str | None]]:
    """`cua_trainer`'s defaults list as (group, option) pairs; `_self_` as ("_self_", None), `ppo_trainer` left out."""
    entries = []
    for entry in trainer.get("defaults", []):
        if isinstance(entry, str):
            if entry != "ppo_trainer":
                entries.append((entry, None))
            continue
        ((key, option),) = entry.items()
        entries.append((key.removeprefix("optional ").strip(), option))
    return entries


def _parsed(overrides: list[str]) -> list[Override]:
    try:
        return [parse_override(override) for override in overrides]
    except PlainConfigError as exc:
        raise RecipeExportError(str(exc)) from None


def trainer_config(overrides: list[str]) -> dict[str, Any]:
    """The exported `<name>_trainer.yaml` as a dict: `hydra` (verl's search path), `defaults: [ppo_trainer, _self_]`,
    verl's sections as `cua_trainer` and the recipe set them, then the whole `cua` section. Read without Hydra or
    OmegaConf (`plain_config`), so that the export runs on the core install."""
    trainer, _ = _load(f"{TRAINER}.yaml")
    defaults = _defaults(trainer)
    groups = {group for group, option in defaults if group != "_self_"}
    selected = dict(defaults)
    values: list[tuple[str, Any]] = []
    hydra: dict[str, Any] = {"searchpath": [VERL_SEARCHPATH]}
    for override in _parsed(overrides):
        key = override.key
        if key in groups or (override.prefix == "+" and "." not in key and _is_group(key)):
            if key not in groups:
                defaults.append((key, None))
            selected[key] = override.value
        elif "." not in key and _is_verl_group(key):
            raise RecipeExportError(f"override {override.text!r} selects one of verl's config groups")
        elif key.startswith("hydra."):
            update(hydra, key.removeprefix("hydra."), override.value)
        else:
            values.append((key, override.value))
    merged: dict[str, Any] = {}
    for group, _ in defaults:
        if group == "_self_":
            merged = merge(merged, {k: v for k, v in trainer.items() if k not in ("defaults", "hydra")})
        elif selected.get(group) is not None:
            merged = merge(merged, _group(group, selected[group]))
    for key, value in values:
        update(merged, key, value)
    cua = merged.pop("cua")
    hydra = merge(trainer.get("hydra", {}), hydra)
    return {"hydra": hydra, "defaults": ["ppo_trainer", "_self_"], **merged, "cua": cua}


def _is_group(name: str) -> bool:
    return importlib.resources.files(CONFIG_PACKAGE).joinpath(name).is_dir()


def _is_verl_group(name: str) -> bool:
    try:
        return importlib.resources.files("verl.trainer.config").joinpath(name).is_dir()
    except ModuleNotFoundError:
        return False
