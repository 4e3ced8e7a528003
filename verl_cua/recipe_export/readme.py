"""The README.md of an exported recipe, in verl-recipe's sections: what it does (recipes/README.md's row), the papers
behind its estimator, how to install, train (the paths it keeps, its settings table) and evaluate it, its results so
far, and how to cite it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from verl_cua.algos.estimators import ESTIMATORS
from verl_cua.recipe_export.citation import ENTROPULSE, citation_section, estimator_papers, paper_line
from verl_cua.recipe_export.evaluation import evaluation_section, results_section
from verl_cua.recipe_export.standalone import standalone


def recipe_row(readme: Path, name: str) -> str:
    """The recipe's "what it does" cell in recipes/README.md ("" when the file or the row is missing)."""
    if not readme.is_file():
        return ""
    for line in readme.read_text().splitlines():
        if line.startswith(f"| `run_{name}.sh` |"):
            return line.split("|", 2)[2].rsplit("|", 1)[0].strip()
    return ""


def shared_meanings(readme: Path) -> dict[str, tuple[tuple[str, ...], str]]:
    """The meanings of the variables recipes/README.md explains in its tables (`VAR`, `VAR2` | meaning): variable ->
    (the row's variables, the meaning)."""
    meanings: dict[str, tuple[tuple[str, ...], str]] = {}
    if readme.is_file():
        for line in readme.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            variables = tuple(re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])) if len(cells) == 2 else ()
            for variable in variables:
                meanings[variable] = (variables, cells[1])
    return meanings


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _algorithm(context: dict[str, Any]) -> list[str]:
    estimator = context["estimator"]
    papers = "; ".join(paper_line(paper) for paper in estimator_papers(estimator))
    lines = [f"* `algorithm.adv_estimator={estimator}`" + (f": {papers}" if papers else "")]
    if context["entropulse"]:
        lines.append(f"* `cua.entropulse.*` (`ENTROPULSE`, default `{context['entropulse']}`): {ENTROPULSE}")
    if context["replay"]:
        lines.append("* `cua.replay.*` (`REPLAY`): ARPO-style replay of buffered successes, arXiv 2505.16282")
    swap = f"`algorithm.adv_estimator={'|'.join(['grpo', *sorted(ESTIMATORS)])}`"  # verl's GRPO, then ours
    return ["## Algorithm", "", *lines, "", f"Any estimator swaps with one key appended to the run: {swap}.", ""]


def _files(context: dict[str, Any]) -> list[str]:
    name = context["name"]
    rows = [
        (f"config/{name}_trainer.yaml", "verl's `ppo_trainer` (defaults `[ppo_trainer, _self_]`, searchpath "
         "`pkg://verl.trainer.config`) plus verl-cua's whole `cua` section and this recipe's settings at their "
         "defaults. It needs no verl-cua config group."),
        (f"main_{name}.py", "The Hydra main: composes that config and hands it to verl-cua's "
         "`verl_cua.main.run_or_exit` (validate, then train with verl)."),
        (f"run_{name}.sh", "The recipe's script: the UPPERCASE settings below, the dataset step, then the main with "
         'one override per line (so every variable takes effect) and `"$@"` last.'),
    ]  # fmt: skip
    if context["preflight"]:
        rows.append(("osworld_preflight.sh", "Sourced by the script: OSWorld's client, Docker, KVM, the VM image."))
    return ["## Files", "", "| file | what |", "|---|---|", *(f"| `{f}` | {what} |" for f, what in rows), ""]


def _installation(context: dict[str, Any]) -> list[str]:
    folder = context["folder"]
    return [
        "## Installation", "",
        "```bash",
        f"pip install -r recipe/{folder}/REQUIRED_VERL.txt   # verl {context['verl']}, which verl-cua is built for",
        f"{context['install']}   # verl-cua with the extras this recipe uses",
        "```", "", *context["needs"], "",
    ]  # fmt: skip


def _training(context: dict[str, Any]) -> list[str]:
    name, folder = context["name"], context["folder"]
    module = f"recipe.{folder}.main_{name}"
    return [
        "## Training", "",
        f"Convention: the folder is `recipe/{folder}/` of a verl checkout (where verl-recipe is checked out, at "
        f"`recipe/`), and it runs from that checkout's root as `python3 -m {module}`. `run_{name}.sh` changes to "
        "the folder two levels above itself, so it can be started from anywhere:",
        "", "```bash",
        f"verl-cua doctor recipe/{folder}     # this machine against the recipe: GPUs, versions, disk, RAM, budgets",
        f"bash recipe/{folder}/run_{name}.sh trainer.total_epochs=3   # appended Hydra overrides win",
        f"python3 -m {module}   # the trainer alone, at the defaults below (after the dataset step)",
        "```", "",
    ]  # fmt: skip


def _settings(context: dict[str, Any]) -> list[str]:
    by_value: dict[str, list[str]] = {}  # keys that keep the same path share a row
    for key, value in context["paths"].items():
        by_value.setdefault(value, []).append(f"`{key}`")
    paths = [f"| {', '.join(keys)} | `{value}` |" for value, keys in by_value.items()]
    return [
        "### Paths", "",
        "These values keep the recipe's default paths, relative to the folder the run starts from (verl's root). "
        "The script sets them from its variables; set them yourself when you run the main alone. An empty value is "
        "filled in at run time by the script.",
        "", "| key | default |", "|---|---|", *paths, "",
        "### Settings", "",
        f"Each can be set from the environment, e.g. `N_RESP=4 bash run_{context['name']}.sh`.",
        "", "| variable | default | sets | meaning |", "|---|---|---|---|", *_setting_rows(context), "",
    ]  # fmt: skip


def _setting_rows(context: dict[str, Any]) -> list[str]:
    """One row per variable, but one row for the variables a shared meaning explains together (no repeated cells)."""
    shared, done, rows = context["meanings"], set(), []
    settings = {s.name: s for s in context["settings"]}
    for s in context["settings"]:
        if s.name in done:
            continue
        names, meaning = shared.get(s.name, ((s.name,), ""))
        if s.meaning or len(names) == 1:
            group = [s]
            meaning = s.meaning or meaning
        else:  # the variables of the shared row that have no comment of their own
            group = [settings[n] for n in names if n in settings and not settings[n].meaning and n not in done]
            meaning = f"{', '.join(f'`{n}`' for n in names)}: {meaning}" if len(group) < len(names) else meaning
        done.update(g.name for g in group)
        variables = ", ".join(f"`{g.name}`" for g in group)
        defaults = ", ".join(f"`{_cell(g.default)}`" for g in group)
        keys = ", ".join(dict.fromkeys(f"`{k}`" for g in group for k in g.keys))
        rows.append(f"| {variables} | {defaults} | {keys} | {_cell(meaning)} |")
    return rows


def readme_text(context: dict[str, Any]) -> str:
    """README.md in verl-recipe's sections (Installation, Training, Evaluation, Results, Citation) from `context`:
    name, folder, version, verl, install, needs, what, estimator, entropulse, replay, preflight, paths (key -> value),
    settings (Setting list), defaults (variable -> default), meanings (`shared_meanings`), config (the exported
    config), script (the recipe's text). verl-cua's checkout paths are rewritten (`standalone`)."""
    name = context["name"]
    intro = [
        f"# {name}: a verl-cua recipe",
        "",
        f"Exported from verl-cua's recipe `{name}` by `verl-cua recipe export {name}` (verl-cua "
        f"{context['version']}, built for verl {context['verl']}: `REQUIRED_VERL.txt`).",
        "",
        context["what"] or f"See the header of `run_{name}.sh`.",
        "",
    ]
    sections = [
        *intro, *_algorithm(context), *_files(context), *_installation(context), *_training(context),
        *_settings(context), *evaluation_section(context), *results_section(context),
        *citation_section(context["estimator"], context["version"]),
    ]  # fmt: skip
    return standalone("\n".join(sections), name, context["folder"])
