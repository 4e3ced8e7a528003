"""The recipe scripts (`verl_cua.resources.recipes_dir`: inside the package, a link to `recipes/` in a checkout), their
names, which of them can be exported, and the verl version verl-cua is pinned to."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import verl_cua
from verl_cua.resources import recipes_dir

TRAINER_CALL = "-m verl_cua.main \\"
VERL_PIN = re.compile(r"^verl(\[[^\]]*\])?\s*==\s*([0-9][^;,\s]*)")


class RecipeExportError(ValueError):
    """A recipe that cannot be exported as asked (unknown name, unusable folder, an unsupported override)."""


def recipe_names() -> list[str]:
    """Every `run_*.sh` recipe, named without `run_` and `.sh`."""
    return sorted(p.name[len("run_") : -len(".sh")] for p in recipes_dir().glob("run_*.sh"))


def unexportable_reason(name: str) -> str | None:
    """Why recipe `name` cannot be exported on its own, or None when it can."""
    text = (recipes_dir() / f"run_{name}.sh").read_text()
    if re.search(r"^\s*bash recipes/run_", text, flags=re.M):
        return "it runs other recipes (bash recipes/run_*.sh)"
    if TRAINER_CALL not in text:
        return "it runs no `python -m verl_cua.main` (no RL stage)"
    return None


def exportable_names() -> list[str]:
    """The recipes `verl-cua recipe export` can write as a verl-recipe folder."""
    return [name for name in recipe_names() if unexportable_reason(name) is None]


def recipe_script(name: str) -> Path:
    """The script of an exportable recipe; a one-line RecipeExportError naming the valid names otherwise."""
    valid = exportable_names()
    if name not in recipe_names():
        raise RecipeExportError(f"unknown recipe {name!r}; valid: {', '.join(valid)}")
    reason = unexportable_reason(name)
    if reason:
        raise RecipeExportError(f"recipe {name!r} cannot be exported: {reason}; valid: {', '.join(valid)}")
    return recipes_dir() / f"run_{name}.sh"


def required_verl() -> str:
    """The verl version verl-cua's `verl` extra pins (installed metadata, else the checkout's pyproject.toml)."""
    try:
        requirements = importlib.metadata.requires("verl-cua") or []
    except importlib.metadata.PackageNotFoundError:
        requirements = []
    if not requirements:
        import tomllib  # Python 3.11+; a 3.10 checkout without installed metadata falls through to verl's version

        pyproject = Path(verl_cua.__file__).resolve().parents[1] / "pyproject.toml"
        extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
        requirements = extras.get("verl", [])
    for requirement in requirements:
        match = VERL_PIN.match(requirement)
        if match:
            return match.group(2)
    return importlib.metadata.version("verl")
