"""`verl-cua doctor RECIPE` takes every form a user has: a name as `verl-cua recipe list` prints it (with or without
`run_` and `.sh`), a path to a checkout recipe, an exported recipe (folder or script), a packaged recipe of an
installed wheel (no `recipes/` beside it); an unknown name is one line listing the valid names. The exported recipe
composes to the same config as the recipe it came from."""

import io
import shutil

import pytest

from verl_cua.cli import main as cli
from verl_cua.doctor import run_doctor
from verl_cua.doctor.recipe import recipe_findings
from verl_cua.doctor.recipe_source import RecipeNotFound, RecipeSource, resolve_recipe, trainer_calls
from verl_cua.recipe_export.catalog import recipe_names
from verl_cua.recipe_export.export import export_recipe
from verl_cua.resources import recipes_dir

CPU = "tiny_grpo_miniwob_cpu"
FLAGSHIP = "qwen3vl_sdpo_osworld"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The CPU recipe and the flagship exported to recipe/<name>/ of a scratch verl checkout: {name: folder}."""
    root = tmp_path_factory.mktemp("verl") / "recipe"
    return {name: (export_recipe(name, root / name), root / name)[1] for name in (CPU, FLAGSHIP)}


@pytest.mark.parametrize("form", ["{}", "run_{}", "run_{}.sh", "{}.sh"])
def test_every_listed_name_resolves_to_its_packaged_script(form, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file of that name here: the name is looked up among the packaged recipes
    for name in recipe_names():
        source = resolve_recipe(form.format(name))
        assert source == RecipeSource(recipes_dir() / f"run_{name}.sh") and source.entry == "verl_cua.main"
    assert resolve_recipe("gpu_smoke").script == recipes_dir() / "gpu_smoke.sh"  # a recipe without run_


def test_an_unknown_name_is_one_line_listing_the_valid_names(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeNotFound) as caught:
        resolve_recipe("run_no_such_recipe")
    assert all(name in str(caught.value) for name in recipe_names())
    assert cli(["doctor", "recipes/run_no_such.sh"]) == 2
    out = capsys.readouterr()
    (line,) = out.err.strip().splitlines()
    assert out.out == "" and "recipes/run_no_such.sh" in line and FLAGSHIP in line
    (tmp_path / "plain").mkdir()
    with pytest.raises(RecipeNotFound, match="not an exported recipe folder"):
        resolve_recipe(str(tmp_path / "plain"))


def test_an_exported_recipe_resolves_by_folder_and_by_script(exported):
    folder = exported[FLAGSHIP]
    for given in (folder, folder / f"run_{FLAGSHIP}.sh"):
        source = resolve_recipe(str(given))
        assert source.entry == f"recipe.{FLAGSHIP}.main_{FLAGSHIP}"
        assert (source.config_dir, source.config_name) == (folder / "config", f"{FLAGSHIP}_trainer")
    checkout = resolve_recipe(str(recipes_dir() / f"run_{FLAGSHIP}.sh"))
    assert checkout.config_dir is None and checkout.entry == "verl_cua.main"


def test_the_exported_recipe_makes_the_recipes_trainer_call_and_composes_to_its_config(exported, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(exported[CPU].parents[1])  # verl's checkout: the exported paths are relative to it
    ours, ours_config = recipe_findings(resolve_recipe(CPU), [])
    theirs, theirs_config = recipe_findings(resolve_recipe(str(exported[CPU])), [])
    assert theirs[0].line().startswith(f"ok    recipe: {CPU}/run_{CPU}.sh: 1 run(s) compose; grpo on miniwob")
    assert ours_config is not None and theirs_config == _relative(ours_config, f"{recipes_dir().parent}/")
    assert [f.line().split(":", 1)[1] for f in theirs[1:]] == [f.line().split(":", 1)[1] for f in ours[1:]]


def _relative(value, root: str):
    """`value` with the checkout's root taken off its paths (a recipe run in place in the checkout makes some absolute;
    the exported one, run from a scratch copy, keeps them relative)."""
    if isinstance(value, dict):
        return {key: _relative(v, root) for key, v in value.items()}
    if isinstance(value, list):
        return [_relative(v, root) for v in value]
    return value.replace(root, "") if isinstance(value, str) else value


def test_the_doctor_checks_an_exported_recipe_with_appended_overrides(exported, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = io.StringIO()
    overrides = ["trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
    assert run_doctor(str(exported[FLAGSHIP]), overrides, out=out) == 1  # no GPU, no docker here
    text = out.getvalue()
    assert f"ok    recipe: {FLAGSHIP}/run_{FLAGSHIP}.sh: 1 run(s) compose; sdpo on osworld, vllm rollout" in text
    assert "the run needs 1 GPU (trainer.nnodes=1 x trainer.n_gpus_per_node=1)" in text  # the appended override


def test_a_wheels_packaged_recipe_runs_from_a_scratch_copy(tmp_path, monkeypatch):
    """In a wheel the recipes sit in verl_cua/_recipes with no recipes/ beside them: the doctor runs a copy laid out
    as they expect, and its paths come back relative, as from a checkout's root."""
    wheel = tmp_path / "site-packages" / "verl_cua" / "_recipes"
    shutil.copytree(recipes_dir(), wheel, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    monkeypatch.chdir(recipes_dir().parent)
    (packaged,) = trainer_calls(RecipeSource(wheel / f"run_{FLAGSHIP}.sh"))
    (checkout,) = trainer_calls(RecipeSource(recipes_dir() / f"run_{FLAGSHIP}.sh"))
    assert not any(str(tmp_path) in arg for arg in packaged)
    root = f"{recipes_dir().parent}/"
    assert packaged == [arg.replace(root, "") for arg in checkout]
    assert "+cua.env.kwargs.path_to_vm=docker_vm_data/Ubuntu.qcow2" in packaged
