"""The core install (`pip install -e .` without extras: pillow, transformers, httpx, rich and what they bring) in a
real fresh venv: no torch, verl, ray, omegaconf or Hydra there, and every `verl-cua` command either works or stops
with one line naming the install command, never a traceback. The doctor checks the machine and records a recipe
(by name, or exported) and names the install its budgets need; `recipe export` writes the same folder as here."""

import filecmp
import re
from pathlib import Path

import pytest

from verl_cua.recipe_export.export import export_recipe
from verl_cua.resources import recipes_dir

FLAGSHIP = "qwen3vl_sdpo_osworld"
VERL_HINT = "pip install 'verl-cua[verl]'"


def _clean(proc) -> str:
    """stdout + stderr, asserted free of tracebacks."""
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    return text


def test_the_core_install_has_no_trainer_stack(core_venv):
    code = (
        "import importlib.util, json, verl_cua; print(json.dumps([verl_cua.__file__] + "
        "[m for m in ('omegaconf', 'hydra', 'torch', 'verl', 'ray') if importlib.util.find_spec(m)]))"
    )
    proc = core_venv.run("python", "-c", code)
    assert proc.returncode == 0, proc.stderr
    package, *present = eval(proc.stdout)  # a JSON list of strings
    assert present == [] and Path(package).parent == Path(__file__).resolve().parents[1] / "verl_cua"


def test_the_doctor_checks_the_machine_and_names_the_trainers_install(core_venv, tmp_path):
    proc = core_venv.run("verl-cua", "doctor", cwd=tmp_path)
    text = _clean(proc)
    assert proc.returncode == 1  # documented: verl missing is a blocker for training
    assert re.search(rf"^FAIL  verl: not installed \(needs ==[0-9.]+: {re.escape(VERL_HINT)}", text, re.M), text
    assert re.search(r"^ok    transformers: ", text, re.M) and text.splitlines()[-1].startswith("FAIL  doctor: ")


@pytest.mark.parametrize("name", [f"run_{FLAGSHIP}", FLAGSHIP, f"run_{FLAGSHIP}.sh"])
def test_the_doctor_takes_a_recipe_name_as_recipe_list_prints_it(core_venv, tmp_path, name):
    listed = core_venv.run("verl-cua", "recipe", "list", cwd=tmp_path).stdout.split()
    assert FLAGSHIP in listed
    proc = core_venv.run("verl-cua", "doctor", name, cwd=tmp_path)
    text = _clean(proc)
    (line,) = [line for line in text.splitlines() if line.startswith("warn  recipe: ")]
    assert line.startswith(f"warn  recipe: run_{FLAGSHIP}.sh: 1 trainer run(s) recorded; ") and VERL_HINT in line
    assert "omegaconf" in line and proc.returncode == 1


def test_an_unknown_recipe_is_one_line_listing_the_valid_names(core_venv, tmp_path):
    proc = core_venv.run("verl-cua", "doctor", "no_such_recipe", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    names = sorted(p.name[4:-3] for p in recipes_dir().glob("run_*.sh"))
    assert "no_such_recipe" in line and all(name in line for name in names)


def test_recipe_export_writes_the_folder_and_the_doctor_reads_it(core_venv, tmp_path):
    out = tmp_path / "verl" / "recipe" / "cua_sdpo"
    proc = core_venv.run("verl-cua", "recipe", "export", FLAGSHIP, str(out), cwd=tmp_path)
    _clean(proc)
    assert proc.returncode == 0
    here = export_recipe(FLAGSHIP, tmp_path / "here" / "recipe" / "cua_sdpo")  # this venv: Hydra, OmegaConf, verl
    written = sorted(str(p.relative_to(tmp_path / "here" / "recipe" / "cua_sdpo")) for p in here)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == written
    match, mismatch, errors = filecmp.cmpfiles(out, here[0].parent, written, shallow=False)
    assert mismatch == errors == [], mismatch  # the same files without the trainer's stack

    for recipe in (out, out / f"run_{FLAGSHIP}.sh"):  # the folder, or its script
        proc = core_venv.run("verl-cua", "doctor", str(recipe), cwd=tmp_path)
        (line,) = [line for line in _clean(proc).splitlines() if line.startswith("warn  recipe: ")]
        assert line.startswith(f"warn  recipe: cua_sdpo/run_{FLAGSHIP}.sh: 1 trainer run(s) recorded; ")


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["verl-cua", "serve", "."], VERL_HINT),
        (["verl-cua", "sft-data", "runs", "--format", "pyautogui", "--model", "m"], VERL_HINT),
        (["verl-cua", "osworld-check", "OSWorld/evaluation_examples"], "verl-cua install-osworld"),
        (
            [
                "verl-cua",
                "eval",
                "--env",
                "miniwob",
                "--tasks",
                "click-test",
                "--model",
                "m",
                "--format",
                "pyautogui",
                "--out",
                "runs/x",
                "--endpoint-wait",
                "0",
            ],
            "pip install 'verl-cua[miniwob]'",
        ),  # fmt: skip
        (["python", "-m", "verl_cua.main"], VERL_HINT),
    ],
    ids=["serve", "sft-data", "osworld-check", "eval-miniwob", "main"],
)
def test_a_command_without_its_extra_stops_with_one_line_naming_the_install(core_venv, tmp_path, args, hint):
    proc = core_venv.run(*args, cwd=tmp_path)
    _clean(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and hint in line, line
    assert not any(tmp_path.iterdir())  # stopped before any work
