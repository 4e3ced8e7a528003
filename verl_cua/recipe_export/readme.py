"""The README.md of an exported recipe: what it does (recipes/README.md's row), the papers behind its estimator,
how to install and run it, the paths it keeps, and its settings table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ARXIV = "https://arxiv.org/abs/{}"
# (paper, arXiv id or None): the ids as docs/algorithms.md and recipes/README.md cite them; no link where they have none
PAPERS = {
    "sdpo": ('SDPO, "Reinforcement Learning via Self-Distillation"', "2601.20802"),
    "gigpo": ('GiGPO, "Group-in-Group Policy Optimization for LLM Agent Training"', "2505.10978"),
    "grpo": ("GRPO, verl's own estimator (from the DeepSeekMath paper)", None),
    "entropulse": ("Entropulse, from ComputerRL", "2508.14040"),
}
ESTIMATOR_PAPERS = {"sdpo": ["sdpo"], "sdpo_grpo": ["sdpo", "grpo"], "gigpo": ["gigpo"], "grpo": ["grpo"]}


def recipe_row(readme: Path, name: str) -> str:
    """The recipe's "what it does" cell in recipes/README.md ("" when the file or the row is missing)."""
    if not readme.is_file():
        return ""
    for line in readme.read_text().splitlines():
        if line.startswith(f"| `run_{name}.sh` |"):
            return line.split("|", 2)[2].rsplit("|", 1)[0].strip()
    return ""


def shared_meanings(readme: Path) -> dict[str, str]:
    """The meanings of the variables recipes/README.md explains in its tables (`VAR`, `VAR2` | meaning)."""
    meanings: dict[str, str] = {}
    if readme.is_file():
        for line in readme.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            variables = re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0]) if len(cells) == 2 else []
            for variable in variables:  # a row naming several variables is kept whole, its names first
                meanings[variable] = cells[1] if len(variables) == 1 else f"{cells[0]}: {cells[1]}"
    return meanings


def _paper(key: str) -> str:
    paper, arxiv = PAPERS[key]
    return paper if arxiv is None else f"{paper}, arXiv:[{arxiv}]({ARXIV.format(arxiv)})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _algorithm(context: dict[str, Any]) -> list[str]:
    estimator = context["estimator"]
    papers = "; ".join(_paper(key) for key in ESTIMATOR_PAPERS.get(estimator, []))
    lines = [f"* `algorithm.adv_estimator={estimator}`" + (f": {papers}" if papers else "")]
    if context["entropulse"]:
        lines.append(f"* `cua.entropulse.*` (`ENTROPULSE`, default `{context['entropulse']}`): {_paper('entropulse')}")
    if context["replay"]:
        lines.append("* `cua.replay.*` (`REPLAY`): ARPO-style replay of buffered successes, arXiv 2505.16282")
    swap = "`algorithm.adv_estimator=grpo|gigpo|sdpo|sdpo_grpo`"
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


def _run(context: dict[str, Any]) -> list[str]:
    name, folder = context["name"], context["folder"]
    module = f"recipe.{folder}.main_{name}"
    return [
        "## Install", "", "```bash", context["install"], "```", "", *context["needs"], "",
        "## Run", "",
        f"Convention: the folder is `recipe/{folder}/` of a verl checkout (where verl-recipe is checked out, at "
        f"`recipe/`), and it runs from that checkout's root as `python3 -m {module}`. `run_{name}.sh` changes to "
        "the folder two levels above itself, so it can be started from anywhere:",
        "", "```bash",
        f"verl-cua recipe export {name} recipe/{folder}     # or copy this folder there",
        f"bash recipe/{folder}/run_{name}.sh trainer.total_epochs=3   # appended Hydra overrides win",
        f"python3 -m {module}   # the trainer alone, at the defaults below (after the dataset step)",
        "```", "",
    ]  # fmt: skip


def _settings(context: dict[str, Any]) -> list[str]:
    paths = [f"| `{key}` | `{value}` |" for key, value in context["paths"].items()]
    rows = []
    for s in context["settings"]:
        meaning = s.meaning or context["meanings"].get(s.name, "")
        keys = ", ".join(f"`{k}`" for k in s.keys)
        rows.append(f"| `{s.name}` | `{_cell(s.default)}` | {keys} | {_cell(meaning)} |")
    return [
        "## Paths", "",
        "These values keep the recipe's default paths, relative to the folder the run starts from (verl's root). "
        "The script sets them from its variables; set them yourself when you run the main alone. An empty value is "
        "filled in at run time by the script.",
        "", "| key | default |", "|---|---|", *paths, "",
        "## Settings", "",
        f"Each can be set from the environment, e.g. `N_RESP=4 bash run_{context['name']}.sh`.",
        "", "| variable | default | sets | meaning |", "|---|---|---|---|", *rows, "",
    ]  # fmt: skip


def readme_text(context: dict[str, Any]) -> str:
    """README.md from `context`: name, folder, version, verl, install, needs, what, estimator, entropulse, replay,
    preflight, paths (key -> value), settings (Setting list), meanings (variable -> meaning from recipes/README.md)."""
    name = context["name"]
    intro = [
        f"# {name}: a verl-cua recipe",
        "",
        f"Exported from verl-cua's `recipes/run_{name}.sh` by `verl-cua recipe export {name}` (verl-cua "
        f"{context['version']}, built for verl {context['verl']}: `REQUIRED_VERL.txt`).",
        "",
        context["what"] or f"See the header of `run_{name}.sh`.",
        "",
    ]
    return "\n".join([*intro, *_algorithm(context), *_files(context), *_run(context), *_settings(context)])
