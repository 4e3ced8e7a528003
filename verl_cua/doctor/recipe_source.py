"""Which recipe `verl-cua doctor RECIPE` checks, and the trainer calls it makes. RECIPE is a name as `verl-cua recipe
list` prints it (with or without `run_` and `.sh`) among the packaged recipes, a path to a recipe script, or an
exported recipe (`verl-cua recipe export`: its folder or its script). The script runs with recording stubs
(nothing installed, downloaded or trained) where it can run as it is, or from a scratch copy laid out as it expects:
a packaged recipe of an installed wheel under `recipes/`, an exported one under `recipe/<folder>/`."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from verl_cua.recipe_export.catalog import recipe_names
from verl_cua.recipe_export.record import MAIN, RecipeRunError, record_calls, write_stubs
from verl_cua.resources import recipes_dir


class RecipeNotFound(ValueError):
    """RECIPE names no recipe: not a script or recipe folder here, nor a packaged recipe's name."""


@dataclass(frozen=True)
class RecipeSource:
    """A recipe to check: its script, the module its trainer call runs, and the Hydra config that call composes."""

    script: Path
    entry: str = MAIN[1]  # verl_cua.main; an exported recipe's recipe.<folder>.main_<name>
    config_dir: Path | None = None  # an exported recipe's config/; None: cua_trainer, inside the package
    config_name: str = "cua_trainer"

    @property
    def label(self) -> str:
        """How the findings name it: the script, with its folder for an exported recipe."""
        return f"{self.script.parent.name}/{self.script.name}" if self.config_dir else self.script.name


def resolve_recipe(text: str) -> RecipeSource:
    """The recipe `text` names; RecipeNotFound, in one line listing the valid names, when it names none."""
    path = Path(text).expanduser()
    if path.is_dir():
        scripts = [s for s in sorted(path.glob("run_*.sh")) if _exported(s)]
        if len(scripts) != 1:
            raise RecipeNotFound(f"{text} is not an exported recipe folder (one run_NAME.sh beside main_NAME.py and "
                                 f"config/NAME_trainer.yaml; found {len(scripts)})")  # fmt: skip
        return _exported(scripts[0])  # type: ignore[return-value]
    if path.is_file():
        return _exported(path) or RecipeSource(path.resolve())
    stem = path.name.removesuffix(".sh")
    for candidate in (recipes_dir() / f"{stem}.sh", recipes_dir() / f"run_{stem}.sh"):
        if path.parent == Path(".") and candidate.is_file():
            return RecipeSource(candidate)
    raise RecipeNotFound(f"no recipe {text!r} (not a file or folder here, nor a packaged recipe); valid names: "
                         f"{', '.join(recipe_names())}, or a path to a recipe script or exported folder")  # fmt: skip


def _exported(script: Path) -> RecipeSource | None:
    """`script` as an exported recipe (run_NAME.sh beside main_NAME.py and config/NAME_trainer.yaml), else None."""
    name = script.name.removeprefix("run_").removesuffix(".sh")
    folder = script.resolve().parent
    config = folder / "config" / f"{name}_trainer.yaml"
    if not (script.name.startswith("run_") and (folder / f"main_{name}.py").is_file() and config.is_file()):
        return None
    return RecipeSource(folder / script.name, f"recipe.{folder.name}.main_{name}", config.parent, f"{name}_trainer")


def _runnable(source: RecipeSource, scratch: Path) -> Path:
    """The script to run: in place in a checkout (`<root>/recipes/run_*.sh`), else a copy under `scratch` laid out as
    the script expects (it changes to the folder above `recipes/`, or two above `recipe/<folder>/`)."""
    if source.config_dir is not None:
        copy = scratch / "recipe" / source.script.parent.name
    elif (source.script.parent.parent / "recipes").is_dir():
        return source.script
    else:  # a packaged recipe of an installed wheel: verl_cua/_recipes
        copy = scratch / "recipes"
    shutil.copytree(source.script.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy / source.script.name


DATASET = ["-m", "verl_cua.integrations.verl.dataset"]


def trainer_calls(source: RecipeSource, env: dict[str, str] | None = None) -> list[list[str]]:
    """The Hydra overrides of each trainer call the recipe makes (most make one), its variables as this shell and
    `env` set them; paths inside a scratch copy are made relative (to where the doctor runs)."""
    return trainer_runs(source, recipe_calls(source, env))


def recipe_calls(source: RecipeSource, env: dict[str, str] | None = None) -> list[list[str]]:
    """Every `python` call the recipe makes ([stub, *arguments]), as `trainer_calls` runs it; none is run."""
    with tempfile.TemporaryDirectory(prefix="verl_cua_doctor_") as tmp:
        stubs = write_stubs(Path(tmp) / "stub")
        scratch = Path(tmp) / "run"
        script = _runnable(source, scratch)
        run_env = {**os.environ, "PYTHON": str(stubs / "python3"), "VENV": str(stubs.parent)}
        run_env.update({"VERL_CUA_COMPOSE_ONLY": "1", **(env or {})})
        try:
            calls = record_calls(script, stubs, Path.cwd(), env=run_env)
        except RecipeRunError as exc:
            raise RuntimeError(f"{source.label} failed before training: {str(exc).strip().splitlines()[-1:]}") from None
        prefixes = {f"{scratch}/", f"{scratch.resolve()}/"}
        return [[_relative(a, prefixes) for a in c] for c in calls if c[0].startswith("python")]


def trainer_runs(source: RecipeSource, calls: list[list[str]]) -> list[list[str]]:
    """The Hydra overrides of each `python -m <entry>` among `calls`; RuntimeError when there is none."""
    entry = ["-m", source.entry]
    mains = [c[3:] for c in calls if c[1:3] == entry]
    if not mains:
        raise RuntimeError(f"the recipe runs no `python -m {source.entry}`")
    return mains


def _relative(arg: str, prefixes: set[str]) -> str:
    for prefix in prefixes:
        arg = arg.replace(prefix, "")
    return arg


def dataset_tasks(calls: list[list[str]]) -> list[str]:
    """The `--tasks` of each OSWorld dataset step among `calls` (`python -m verl_cua.integrations.verl.dataset
    --env osworld --tasks T`), repeats dropped."""
    out: list[str] = []
    for call in calls:
        args = call[3:] if call[1:3] == DATASET else None
        if not args or _option(args, "--env") != "osworld":
            continue
        tasks = _option(args, "--tasks")
        if tasks and tasks not in out:
            out.append(tasks)
    return out


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(f"{name}="):
            return arg.partition("=")[2]
    return None
