"""Every exportable recipe, exported, stands alone in a verl-recipe checkout: no path of verl-cua's checkout
(`envs/`, `docs/`, `tests/`, `recipes/`) in any file, a README in verl-recipe's sections with the `verl-cua eval`
command of the recipe's env, its status and citations, a settings table without repeated cells, and a
REQUIRED_VERL.txt that pip reads."""

import re

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from verl_cua.recipe_export.catalog import exportable_names, recipes_dir, required_verl
from verl_cua.recipe_export.config import default_overrides, trainer_config
from verl_cua.recipe_export.export import export_recipe

CHECKOUT_PATH = re.compile(r"(?<![\w/.:-])(?:envs|docs|tests|recipes)/[\w./-]*")
SECTIONS = ["## Installation", "## Training", "## Evaluation", "## Results", "## Citation"]
ARXIV = {"sdpo": ["2601.20802"], "gigpo": ["2505.10978"], "grpo": ["2402.03300"], "sdpo_grpo": ["2601.20802"]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{name: folder}: every exportable recipe at recipe/<name>/ of a scratch verl checkout."""
    root = tmp_path_factory.mktemp("verl") / "recipe"
    return {name: (export_recipe(name, root / name), root / name)[1] for name in exportable_names()}


def _table(readme: str, heading: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first table under `heading`."""
    lines = readme.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines[start + 2 : end]]


def test_every_exportable_recipe_is_exported(exported):
    assert set(exported) == {p.name[4:-3] for p in recipes_dir().glob("run_*.sh")} - {
        "qwen3vl_sft_osworld", "qwen3vl_sft_then_sdpo_osworld"}  # fmt: skip


def test_no_file_names_a_path_of_verl_cuas_checkout(exported):
    for name, folder in exported.items():
        for path in folder.rglob("*"):
            if path.is_file():
                left = CHECKOUT_PATH.findall(path.read_text())
                assert left == [], f"{path.relative_to(folder.parent)}: {left}"


def test_the_readme_has_verl_recipes_sections_with_this_recipes_eval_status_and_citations(exported):
    for name, folder in exported.items():
        readme = (folder / "README.md").read_text()
        headings = [line for line in readme.splitlines() if line.startswith("## ")]
        assert [h for h in headings if h in SECTIONS] == SECTIONS, (name, headings)
        config = trainer_config(default_overrides(recipes_dir() / f"run_{name}.sh")[0])
        env, fmt = config["cua"]["env"]["name"], config["cua"]["action"]["format"]
        evaluation = readme.split("## Evaluation", 1)[1].split("## Results", 1)[0]
        assert re.search(rf"^verl-cua eval --env {env} .*--format {fmt} ", evaluation, re.M), (name, evaluation)
        results = readme.split("## Results", 1)[1].split("## Citation", 1)[0]
        script = (recipes_dir() / f"run_{name}.sh").read_text()
        if "not yet run on GPUs" in script:
            assert "not yet run on GPUs" in results and "No success rate is claimed" in results, name
        citation = readme.split("## Citation", 1)[1]
        assert "@software{verl_cua," in citation and citation.count("{") == citation.count("}")
        for arxiv in ARXIV[config["algorithm"]["adv_estimator"]]:
            assert f"eprint = {{{arxiv}}}" in citation, (name, arxiv)


def test_the_settings_and_paths_tables_repeat_no_cell(exported):
    for name, folder in exported.items():
        readme = (folder / "README.md").read_text()
        settings = _table(readme, "### Settings")
        for column in (0, 2, 3):  # variables, keys set, meaning (defaults may well repeat: `8`, `false`)
            cells = [row[column] for row in settings if row[column]]
            assert len(cells) == len(set(cells)), (name, column, [c for c in cells if cells.count(c) > 1])
        variables = re.findall(r"`([A-Z][A-Z0-9_]*)`", " ".join(row[0] for row in settings))
        script = (recipes_dir() / f"run_{name}.sh").read_text()
        assert sorted(variables) == sorted(set(re.findall(r"^\s*([A-Z][A-Z0-9_]*)=\$\{\1:-", script, re.M)))
        paths = _table(readme, "### Paths")
        for column in (0, 1):
            cells = [row[column] for row in paths]
            assert len(cells) == len(set(cells)), (name, cells)


def test_required_verl_is_pip_requirements(exported):
    for name, folder in exported.items():
        requirements = []
        for line in (folder / "REQUIRED_VERL.txt").read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                try:
                    requirements.append(Requirement(line))
                except InvalidRequirement as exc:
                    pytest.fail(f"{name}: {line!r}: {exc}")
        assert [(r.name, str(r.specifier)) for r in requirements] == [("verl", f"=={required_verl()}")]
