"""`verl-cua install-osworld` installs exactly our `osworld` extra plus desktop-env --no-deps; `setup-desktop` runs
the setup script that ships inside the package (tests/run.sh runs both through envs/osworld/install.sh and
envs/local_desktop/setup.sh on every CI run)."""

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
