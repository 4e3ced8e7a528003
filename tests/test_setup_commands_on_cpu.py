"""`verl-cua install-osworld` installs exactly our `osworld` extra plus desktop-env --no-deps; `setup-desktop` runs
the setup script that ships inside the package (tests/run.sh runs both through envs/osworld/install.sh and
envs/local_desktop/setup.sh on every CI run)."""

import subprocess
from pathlib import Path

import tomllib

from verl_cua import setup_commands
from verl_cua.resources import checkout_root, envs_dir, recipes_dir

ROOT = Path(__file__).resolve().parents[1]


def test_the_extra_read_from_the_installed_metadata_is_pyprojects():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert setup_commands.extra_requirements("osworld") == extras["osworld"]
    assert setup_commands.extra_requirements("miniwob") == extras["miniwob"]
    assert setup_commands.extra_requirements("no-such-extra") == []


def test_install_osworld_asks_pip_for_the_extra_then_desktop_env_without_its_pins(monkeypatch):
    calls = []
    monkeypatch.setattr(setup_commands.subprocess, "run", lambda cmd, check: calls.append(cmd))
    monkeypatch.setattr(setup_commands, "_installed", lambda dist: None)
    monkeypatch.setattr("verl_cua.envs.osworld.check.check_client", lambda: None)
    assert setup_commands.install_osworld("1.0.2") == 0
    extra, client = calls
    assert extra[-len(setup_commands.extra_requirements("osworld")) :] == setup_commands.extra_requirements("osworld")
    assert client[-2:] == ["--no-deps", "desktop-env==1.0.2"]
    assert "-c" in extra and str(ROOT / "tests" / "constraints.txt") in extra  # a checkout keeps its torch pins


def test_in_a_checkout_the_package_data_are_this_trees_folders():
    assert checkout_root() == ROOT
    assert envs_dir() == ROOT / "envs" and recipes_dir() == ROOT / "recipes"
    assert (envs_dir() / "local_desktop" / "setup.sh").is_file()


def _requirement(text: str):
    from packaging.requirements import Requirement

    req = Requirement(text)
    return req.name.lower(), req.specifier


def test_the_evaluators_extra_covers_every_package_desktop_envs_evaluators_import():
    """Each third-party module desktop-env's metrics and getters import is installed by the osworld extra or the
    osworld-evaluators one (by its pip name), so no metric's package is left out of both."""
    import ast
    import importlib.util
    import sys

    import pytest

    spec = importlib.util.find_spec("desktop_env")
    if spec is None:
        pytest.skip("desktop-env is not installed")
    from verl_cua.envs.osworld.evaluators import PIP_NAMES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(map(_requirement, setup_commands.extra_requirements("osworld-evaluators"))) == sorted(
        map(_requirement, extras["osworld-evaluators"])
    )
    provided = {_requirement(r)[0] for r in extras["osworld"] + extras["osworld-evaluators"] + extras["verl"]}
    provided |= {"pillow", "numpy", "requests", "lxml", "scipy", "playwright", "pandas"}  # the core's or verl's own
    root = Path(next(iter(spec.submodule_search_locations))) / "evaluators"
    missing = set()
    for source in [*root.glob("metrics/*.py"), *root.glob("getters/*.py")]:
        for node in ast.walk(ast.parse(source.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "desktop_env":
                    continue
                pip = PIP_NAMES.get(top, top).lower()
                if pip not in provided and {"pil": "pillow", "yaml": "pyyaml"}.get(pip, pip) not in provided:
                    missing.add(f"{top} ({source.parent.name}/{source.stem})")
    assert not missing, f"imported by desktop-env's evaluators, in no extra: {sorted(missing)}"


def test_install_osworld_evaluators_holds_verls_stack_and_leaves_easyocr_out_without_torch(monkeypatch):
    runs = []

    def run(cmd, check=False):
        held = cmd[cmd.index("-c", cmd.index("install") + 3) + 1] if cmd.count("-c") > 1 else None
        runs.append((cmd, Path(held).read_text() if held else None))
        return subprocess.CompletedProcess(cmd, 0)

    versions = {"torch": "2.14.1", "numpy": "2.4.6", "transformers": "5.10.4", "pillow": "13.0.0"}
    monkeypatch.setattr(setup_commands.subprocess, "run", run)
    monkeypatch.setattr(setup_commands, "_installed", lambda dist: versions.get(dist))
    monkeypatch.setattr("verl_cua.envs.osworld.check.check_client", lambda: None)
    assert setup_commands.install_osworld("1.0.2", evaluators=True) == 0
    (cmd, held) = runs[-1]
    wanted = setup_commands.extra_requirements("osworld-evaluators")
    assert cmd[-len(wanted) :] == wanted
    assert held.splitlines() == [f"{d}=={v}" for d, v in versions.items()]  # pip may not move them
    versions.pop("torch")
    runs.clear()
    assert setup_commands.install_osworld("1.0.2", evaluators=True) == 0
    (cmd, held) = runs[-1]
    assert not any(r.startswith("easyocr") for r in cmd) and "torch==" not in held
    runs.clear()
    assert setup_commands.install_osworld("1.0.2") == 0  # offered, not installed
    assert not any("python-pptx" in " ".join(cmd) for cmd, _ in runs)


def test_install_osworld_evaluators_reports_what_pip_could_not_install_and_keeps_the_rest(monkeypatch, capsys):
    tried = []

    def run(cmd, check=False):  # pip cannot place librosa beside the held stack, alone or with the rest
        tried.append(cmd)
        return subprocess.CompletedProcess(cmd, 1 if any(r.startswith("librosa") for r in cmd) else 0)

    monkeypatch.setattr(setup_commands.subprocess, "run", run)
    monkeypatch.setattr(setup_commands, "_installed", lambda dist: {"torch": "2.14.1"}.get(dist))
    monkeypatch.setattr("verl_cua.envs.osworld.check.check_client", lambda: None)
    assert setup_commands.install_osworld("1.0.2", evaluators=True) == 1
    wanted = setup_commands.extra_requirements("osworld-evaluators")
    singles = [cmd[-1] for cmd in tried if cmd[-1] in wanted and cmd[-2] != wanted[-2]]
    assert sorted(singles) == sorted(wanted)  # after the failed all-at-once, each on its own
    out, err = capsys.readouterr()
    assert "osworld evaluators ready: python-pptx" in out and "librosa" not in out.split("ready:")[1].splitlines()[0]
    assert err.strip().splitlines()[-1].startswith("verl-cua install-osworld: pip could not install librosa beside")


def test_install_osworld_evaluators_with_nothing_left_or_no_extra_says_so(monkeypatch, capsys):
    ok = lambda cmd, check=False: subprocess.CompletedProcess(cmd, 0)  # noqa: E731
    monkeypatch.setattr(setup_commands.subprocess, "run", ok)
    monkeypatch.setattr("verl_cua.envs.osworld.check.check_client", lambda: None)
    monkeypatch.setattr(setup_commands, "_installed", lambda dist: None if dist in ("easyocr", "torch") else "1.0.2")
    assert setup_commands.install_osworld("1.0.2", evaluators=True) == 0  # only easyocr missing, and no torch
    assert "nothing to install" in capsys.readouterr().out
    monkeypatch.setattr(setup_commands, "extra_requirements", lambda extra: [] if extra != "osworld" else ["x"])
    assert setup_commands.install_osworld("1.0.2", evaluators=True) == 2  # metadata older than the extra
    assert "has no osworld-evaluators extra; reinstall it" in capsys.readouterr().err
