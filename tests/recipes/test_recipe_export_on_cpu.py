"""`verl-cua recipe export`: the flagship, GiGPO and the CPU recipe written as verl-recipe folders. The exported
config is composed with Hydra from its own folder on verl's ppo_trainer alone (no verl-cua config group) and must equal
the recipe's own config (its overrides, collected by the stub run, composed on `cua_trainer`); it passes our checks and
verl's. The exported script runs (with stubs) the same steps with the same overrides, through the exported main (less
the config group its config has folded in, `+key` as `++key`), and they compose on the exported config to the
recipe's config."""

import importlib
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from verl_cua.cli import main as cli
from verl_cua.integrations.verl.config.checks import validate_cua_config
from verl_cua.integrations.verl.config.prepare import prepare_config
from verl_cua.recipe_export.catalog import recipe_names, recipes_dir
from verl_cua.recipe_export.config import default_overrides
from verl_cua.recipe_export.export import export_recipe
from verl_cua.recipe_export.record import main_overrides, record_calls, write_stubs
from verl_cua.recipe_export.script import exported_overrides
from verl_cua.testing.interpreters import python_without

ROOT = Path(__file__).resolve().parents[2]
# the flagship, GiGPO (a `+key` of its own) and the CPU recipe
EXPORTED = {"qwen3vl_sdpo_osworld": "sdpo", "qwen3vl_gigpo_osworld": "gigpo", "tiny_grpo_miniwob_cpu": "grpo"}
CUA_DEFAULT = ROOT / "verl_cua" / "integrations" / "verl" / "config" / "cua" / "default.yaml"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each recipe exported to <root>/recipe/<name>/, as it sits in a verl checkout; (root, {name: folder})."""
    root = tmp_path_factory.mktemp("verl_checkout")
    return root, {name: (export_recipe(name, root / "recipe" / name), root / "recipe" / name)[1] for name in EXPORTED}


def _ours(overrides):
    """The recipe's config as `python -m verl_cua.main` composes it (cua_trainer + groups)."""
    with initialize_config_module("verl_cua.integrations.verl.config", version_base=None):
        return compose("cua_trainer", overrides=[o for o in overrides if not o.lstrip("+~").startswith("hydra.")])


def _exported(folder: Path, name: str, overrides=()):
    """The exported config composed from its own folder; verl's config is on the search path, ours is not."""
    with initialize_config_dir(config_dir=str(folder / "config"), version_base=None):
        return compose(f"{name}_trainer", overrides=[o for o in overrides if not o.lstrip("+~").startswith("hydra.")])


def _keys(node, prefix=""):
    """Every dotted key of a nested dict (inner ones too)."""
    if not isinstance(node, dict):
        return set()
    return {k for key, value in node.items() for k in {f"{prefix}{key}", *_keys(value, f"{prefix}{key}.")}}


@pytest.mark.parametrize("name", EXPORTED)
def test_exported_config_stands_on_ppo_trainer_and_equals_the_recipe(name, exported):
    _, folders = exported
    raw = yaml.safe_load((folders[name] / "config" / f"{name}_trainer.yaml").read_text())
    assert raw["defaults"] == ["ppo_trainer", "_self_"]
    assert raw["hydra"]["searchpath"] == ["pkg://verl.trainer.config"]
    assert _keys(yaml.safe_load(CUA_DEFAULT.read_text())) <= _keys(raw["cua"])  # every cua key, written out

    overrides, _ = default_overrides(recipes_dir() / f"run_{name}.sh")
    ours, theirs = _ours(overrides), _exported(folders[name], name)
    assert theirs.algorithm.adv_estimator == ours.algorithm.adv_estimator == EXPORTED[name]
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.key_or_group
        if key.startswith("hydra.") or "." not in key:  # hydra.run.dir: in the file's hydra section; preset=...
            continue
        mine, recipe = OmegaConf.select(theirs, key), OmegaConf.select(ours, key)
        as_plain = lambda v: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v  # noqa: E731
        assert as_plain(mine) == as_plain(recipe), key
    assert OmegaConf.to_container(theirs) == OmegaConf.to_container(ours)  # nothing else differs either
    if "hydra.run.dir" in " ".join(overrides):
        assert raw["hydra"]["run"]["dir"] == "outputs/tiny_grpo_miniwob/hydra"  # the recipe's default, relative

    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from verl_cua.integrations.verl.plugin import register_estimators

    register_estimators()  # sdpo, sdpo_grpo, gigpo; loss sdpo

    validate_cua_config(OmegaConf.to_container(theirs.cua, resolve=True))
    prepare_config(theirs, registered=tuple(ADV_ESTIMATOR_REGISTRY))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        validate_config(
            config=theirs, use_reference_policy=need_reference_policy(theirs), use_critic=need_critic(theirs)
        )


def _relative(calls, root: Path):
    return [[arg.replace(f"{root}/", "") for arg in call] for call in calls]


@pytest.mark.parametrize("name", EXPORTED)
def test_exported_script_runs_the_recipe_through_the_exported_main(name, exported, tmp_path):
    """Stub runs of the recipe and of the export, both at their defaults: the same dataset steps and trainer
    overrides, and the trainer is `python3 -m recipe.<name>.main_<name>` from the folder holding recipe/."""
    root, folders = exported
    script = folders[name] / f"run_{name}.sh"
    assert "verl_cua.main" not in script.read_text() and "source recipes/" not in script.read_text()
    stubs = write_stubs(tmp_path / "stub")
    env = {"HOME": str(tmp_path), "VENV": str(stubs.parent), "VERL_CUA_COMPOSE_ONLY": "1"}
    calls = _relative(record_calls(script, stubs, tmp_path, env=env), root)
    entry = ["-m", f"recipe.{name}.main_{name}"]
    overrides, _ = default_overrides(recipes_dir() / f"run_{name}.sh")
    theirs = main_overrides(calls, entry=entry)
    assert theirs == exported_overrides(overrides)
    assert not any(o.startswith("preset=") for o in theirs)  # the exported config has no groups: it holds the preset
    # the exported script's overrides compose on the exported config (verl-cua's groups out of reach) to the recipe's
    mine = OmegaConf.to_container(_exported(folders[name], name, theirs))
    assert mine == OmegaConf.to_container(_ours(overrides))
    steps = [c for c in calls if c[1:3] != entry]
    checkout = tmp_path / "checkout"
    (checkout / "recipes").mkdir(parents=True)
    for sh in recipes_dir().glob("*.sh"):
        (checkout / "recipes" / sh.name).write_text(sh.read_text())
    original = _relative(record_calls(checkout / "recipes" / f"run_{name}.sh", stubs, tmp_path, env=env), checkout)
    assert steps == [c for c in original if c[1:3] != ["-m", "verl_cua.main"]]
    assert any(c[1:3] == ["-m", "verl_cua.integrations.verl.dataset"] for c in steps)  # the dataset step is kept


def test_an_exported_osworld_recipe_checks_its_interpreter_from_its_own_folder(exported, tmp_path):
    """The export carries recipes/preflight.sh beside osworld_preflight.sh, and its hint installs OSWorld's client
    into the interpreter the recipe runs, with the installed package's command (no checkout script)."""
    _, folders = exported
    exe = python_without("desktop_env", tmp_path)
    script = folders["qwen3vl_sdpo_osworld"] / "run_qwen3vl_sdpo_osworld.sh"
    env = {**os.environ, "PYTHON": str(exe), "PROVIDER": "local", "DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    lines = [line for line in proc.stderr.strip().splitlines() if not line.startswith("+")]  # not set -x
    lacks = f"run_qwen3vl_sdpo_osworld.sh: python: {exe} (PYTHON={exe}) lacks OSWorld"
    client = [line for line in lines if line.startswith(lacks)]
    assert proc.returncode == 1 and len(client) == 1, client  # one blocker of all, listed together
    assert f"({exe} -m verl_cua.cli install-osworld)" in client[0] and "envs/osworld" not in client[0]
    assert "blocker(s) before the run starts" in lines[-1]


@pytest.mark.parametrize("name", EXPORTED)
def test_exported_main_composes_its_config(name, exported, monkeypatch, capsys):
    root, folders = exported
    monkeypatch.syspath_prepend(str(root))
    module = importlib.import_module(f"recipe.{name}.main_{name}")
    assert module.run_or_exit.__module__ == "verl_cua.main"  # our public entry, not a copy
    monkeypatch.setattr(sys, "argv", [module.__file__, "--cfg", "job"])  # Hydra prints the composed job config
    try:
        module.main()
    finally:
        GlobalHydra.instance().clear()
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["algorithm"]["adv_estimator"] == EXPORTED[name] and "cua" in printed


def test_bash_n_readme_and_required_verl(exported):
    _, folders = exported
    (pin,) = re.findall(r'^verl = \["verl\[verl-core\]==([0-9.]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    cited = (ROOT / "recipes" / "README.md").read_text() + (ROOT / "docs" / "algorithms.md").read_text()
    for name, folder in folders.items():
        assert subprocess.run(["bash", "-n", str(folder / f"run_{name}.sh")]).returncode == 0
        assert f"\nverl=={pin}\n" in (folder / "REQUIRED_VERL.txt").read_text()  # a pip requirement line
        readme = (folder / "README.md").read_text()
        for arxiv in re.findall(r"arxiv\.org/abs/([0-9.]+)", readme):  # only papers our own docs cite
            assert arxiv in cited, arxiv
        variables = re.findall(r"^\s*([A-Z][A-Z0-9_]*)=\$\{\1:-", (recipes_dir() / f"run_{name}.sh").read_text(), re.M)
        for variable in variables:  # the settings table: every variable of the script (some share a row)
            assert re.search(rf"^\| (`[A-Z0-9_]+`, )*`{variable}`[,| ]", readme, re.M), variable
        assert re.search(r"^\| `data\.train_files`[,| ]", readme, re.M)  # a data path kept at the recipe's default
    assert "arxiv.org/abs/2601.20802" in (folders["qwen3vl_sdpo_osworld"] / "README.md").read_text()  # SDPO
    assert "pip install 'verl-cua[verl,miniwob]'" in (folders["tiny_grpo_miniwob_cpu"] / "README.md").read_text()


def test_cli_list_unknown_name_and_existing_dir(tmp_path, capsys):
    assert cli(["recipe", "list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == sorted(p.name[4:-3] for p in (ROOT / "recipes").glob("run_*.sh")) == recipe_names()

    assert cli(["recipe", "export", "no_such_recipe", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_recipe" in err[0] and all(n in err[0] for n in EXPORTED)
    assert not (tmp_path / "x").exists()

    out = tmp_path / "recipe" / "tiny_grpo_miniwob_cpu"
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    assert cli(["recipe", "export", "tiny_grpo_miniwob_cpu", str(out)]) == 2
    assert "--force" in capsys.readouterr().err and not (out / "README.md").exists()
    assert cli(["recipe", "export", "tiny_grpo_miniwob_cpu", str(out), "--force"]) == 0
    assert (out / "README.md").is_file() and (out / "notes.txt").read_text() == "mine"

    assert cli(["recipe", "export", "qwen3vl_sft_osworld", str(tmp_path / "sft")]) == 2  # no RL stage to export
    assert "cannot be exported" in capsys.readouterr().err
