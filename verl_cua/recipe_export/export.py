"""`verl-cua recipe export NAME DIR`: one of our recipes written as a verl-recipe folder (README.md,
REQUIRED_VERL.txt, config/<name>_trainer.yaml, main_<name>.py, run_<name>.sh)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from verl_cua.envs import env_spec
from verl_cua.recipe_export.catalog import RecipeExportError, recipe_script, recipes_dir, required_verl
from verl_cua.recipe_export.config import default_overrides, path_keys, trainer_config
from verl_cua.recipe_export.plain_config import dump_yaml
from verl_cua.recipe_export.readme import readme_text, recipe_row, shared_meanings
from verl_cua.recipe_export.script import preflight_script, run_script, settings
from verl_cua.resources import pip_install

PREFLIGHT = "osworld_preflight.sh"
INTERPRETER_CHECK = "preflight.sh"  # osworld_preflight.sh sources it
MAIN = '''"""{name}: verl-cua's recipe on verl's ppo_trainer (config/{name}_trainer.yaml); see README.md."""

import hydra
from omegaconf import DictConfig

from verl_cua.main import run_or_exit


@hydra.main(config_path="config", config_name="{name}_trainer", version_base=None)
def main(config: DictConfig) -> None:
    """Validate the composed config and train (verl-cua's entry for a composed trainer config)."""
    run_or_exit(config, prog="{name}")


if __name__ == "__main__":
    main()
'''


def _yaml(name: str, config: dict[str, Any]) -> str:
    header = (
        f"# {name}: verl's ppo_trainer, verl-cua's `cua` keys (all of them) and the settings of verl-cua's recipe\n"
        f"# {name} at their defaults, exported by `verl-cua recipe export {name}`.\n"
        "# Paths are relative to where the run starts.\n"
    )
    return header + dump_yaml(config)


def _install(env: str, rollout: str) -> str:
    extras = ["verl", *([rollout] if rollout in ("vllm", "sglang") else []), *([env] if env != "local" else [])]
    return pip_install(*extras)


def required_verl_txt(name: str, verl: str) -> str:
    """REQUIRED_VERL.txt: the verl release as a pip requirement (`pip install -r REQUIRED_VERL.txt`), comments `#`."""
    return (
        f"# {name} (verl-cua recipe export): the verl release verl-cua is built for and tested with.\n"
        "# pip install -r REQUIRED_VERL.txt; verl-cua itself: see README.md, Installation.\n"
        f"verl=={verl}\n"
    )


def _needs(env: str) -> list[str]:
    """What the machine needs for `env`, from its record (`EnvSpec.needs`)."""
    needs = env_spec(env).needs
    return [needs] if needs else []


def export_recipe(name: str, out: Path, force: bool = False) -> list[Path]:
    """Write recipe `name` as a verl-recipe folder at `out`; the files written. Refuses a non-empty `out` unless
    `force` (then the export's own files are written over, others left alone)."""
    script = recipe_script(name)
    folder = out.resolve().name
    if not folder.isidentifier():
        raise RecipeExportError(f"{out}: the folder's name must be a Python identifier (it is recipe.{folder})")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not force)):
        raise RecipeExportError(f"{out} exists and is not an empty folder; --force writes over it")
    overrides, relative = default_overrides(script)
    config = trainer_config(overrides)
    env = config["cua"]["env"]["name"]
    rollout = config.get("actor_rollout_ref", {}).get("rollout", {}).get("name", "")
    install = _install(env, rollout)
    text = script.read_text()
    preflight = f"source recipes/{PREFLIGHT}" in text
    variables = settings(text)
    names = {s.name for s in variables}
    resolved = {k: v for k, v in (o.lstrip("+~").split("=", 1) for o in overrides)}
    context = {
        "name": name,
        "folder": folder,
        "version": importlib.metadata.version("verl-cua"),
        "verl": required_verl(),
        "install": install,
        "needs": _needs(env),
        "what": recipe_row(recipes_dir() / "README.md", name),
        "estimator": config["algorithm"]["adv_estimator"],
        "entropulse": next((s.default for s in variables if s.name == "ENTROPULSE"), None),
        "replay": "REPLAY" in names,
        "paths": {key: resolved[key] for key in path_keys(overrides, relative)},
        "settings": variables,
        "meanings": shared_meanings(recipes_dir() / "README.md"),
        "preflight": preflight,
        "defaults": {s.name: s.default for s in variables},
        "config": config,
        "script": text,
    }
    files = {
        "README.md": readme_text(context),
        "REQUIRED_VERL.txt": required_verl_txt(name, context["verl"]),
        "__init__.py": "",
        "config/__init__.py": "",  # Hydra finds config/ as a package when main_<name> is imported
        f"config/{name}_trainer.yaml": _yaml(name, config),
        f"main_{name}.py": MAIN.format(name=name),
        f"run_{name}.sh": run_script(text, name, folder, install),
    }
    if preflight:
        for shell in (PREFLIGHT, INTERPRETER_CHECK):
            files[shell] = preflight_script((recipes_dir() / shell).read_text(), folder, name)
    written = []
    for relative_path, content in files.items():
        path = out / relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    return written
