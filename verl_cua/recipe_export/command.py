"""`verl-cua recipe list` and `verl-cua recipe export NAME DIR [--force]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verl_cua.recipe_export.catalog import RecipeExportError, recipe_names, unexportable_reason


def _list_cmd(args: argparse.Namespace) -> int:
    for name in recipe_names():
        reason = unexportable_reason(name)
        print(name if reason is None else f"{name}  (not exportable: {reason})")
    return 0


def _export_cmd(args: argparse.Namespace) -> int:
    from verl_cua.recipe_export.export import export_recipe  # core install: no Hydra, OmegaConf or verl needed

    try:
        written = export_recipe(args.name, Path(args.dir), force=args.force)
    except RecipeExportError as exc:
        print(f"verl-cua recipe: {exc}", file=sys.stderr)
        return 2
    out = Path(args.dir)
    print(f"{args.name} -> {out}: {', '.join(str(p.relative_to(out)) for p in written)}")
    print(f"run: bash {out / f'run_{args.name}.sh'}  (install and settings: {out / 'README.md'})")
    folder = out.resolve().name
    if out.resolve().parent.name != "recipe":
        print(f"note: the script runs `python3 -m recipe.{folder}.main_{args.name}` from the folder that holds "
              f"recipe/: move {out} to recipe/{folder}/ of your verl checkout", file=sys.stderr)  # fmt: skip
    return 0


def add_recipe_command(sub) -> None:
    """Add `recipe` (`list`, `export`) to the `verl-cua` subcommands."""
    p = sub.add_parser("recipe", help="list our recipes, or export one as a verl-recipe folder")
    actions = p.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every recipes/run_*.sh, by NAME (without run_ and .sh)").set_defaults(
        func=_list_cmd
    )
    e = actions.add_parser(
        "export",
        help="write a recipe as a verl-recipe folder (README, REQUIRED_VERL.txt, config, main, run script)",
        description="DIR becomes recipe/<DIR's name>/ of a verl checkout: its script runs from the folder two levels "
        "up as `python3 -m recipe.<name of DIR>.main_NAME`. The config stands on verl's ppo_trainer alone.",
    )
    e.add_argument("name", help="a recipe name from `verl-cua recipe list`, e.g. qwen3vl_sdpo_osworld")
    e.add_argument("dir", help="the folder to write (its name must be a Python identifier)")
    e.add_argument("--force", action="store_true", help="write into a non-empty DIR")
    e.set_defaults(func=_export_cmd)
