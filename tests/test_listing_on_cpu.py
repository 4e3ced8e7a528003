"""`verl-cua list`'s text: a heading per group, a line per registered name with where it is defined, an env's
EnvSpec in words, and verl-cua's names in verl's registries read from the plug-in's table without importing verl."""

from pathlib import Path

import pytest

import verl_cua
from verl_cua.envs import DesktopCost, EnvSpec
from verl_cua.listing import GROUPS, describe_spec, listing


def test_all_lists_every_group_with_each_name_and_its_module():
    text = listing()
    headings = [line.split(":")[0] for line in text.splitlines() if not line.startswith("  ")]
    assert headings == list(GROUPS)
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert lines["uitars"].split()[1] == "verl_cua.actions.formats.uitars:UITarsFormat"
    assert lines["anthropic"].split()[1] == "verl_cua.eval.apis.anthropic_messages:AnthropicMessages"
    assert lines["miniwob"].split()[1] == "verl_cua.envs.miniwob:MiniWoBEnv"
    assert "screen 1920x1080; provider local by default" in lines["osworld"] and "docker: 4 GB, 4 cores" in text


def test_one_group_only_and_an_unknown_group_is_one_line():
    assert listing("apis").splitlines()[0].startswith("apis:") and "uitars" not in listing("apis")
    with pytest.raises(ValueError, match=r"^unknown group 'env'; valid groups: formats, apis, envs, verl, all$"):
        listing("env")


def test_an_env_registered_here_is_listed_with_its_spec_or_the_defaults(scratch_env):
    vnc = {"vnc": DesktopCost(1, 2)}
    kiosk = EnvSpec(screen=lambda kw: (800, 600), provider="vnc", provider_desktops=vnc, keeps_idle=True)
    scratch_env("kiosk", kiosk, entry_point="plugins.kiosk:KioskEnv")  # a lazy entry point: listed, never imported
    scratch_env("bare")
    lines = {line.split()[0]: line for line in listing("envs").splitlines()[1:]}
    assert lines["kiosk"].split()[1] == "plugins.kiosk:KioskEnv"
    said = "screen 800x600; provider vnc by default; desktop 0.6 GB RAM, 0.5 cores (vnc: 1 GB, 2 cores); idle envs kept"
    assert lines["kiosk"].endswith(f"{said} loaded")
    assert lines["bare"].endswith("screen from kwargs.screen; desktop 0.6 GB RAM, 0.5 cores")


def test_a_spec_whose_screen_needs_kwargs_says_so_instead_of_failing():
    assert describe_spec(EnvSpec(screen=lambda kw: tuple(kw["screen"]))).startswith("screen from kwargs.screen;")


def test_the_verl_group_names_modules_that_exist():
    """The plug-in's table is text (read without verl): a moved or renamed module must fail here, not in a listing."""
    from verl_cua.integrations.verl.plugin import ESTIMATORS, REGISTERED

    root = Path(verl_cua.__file__).parent.parent
    for _registry, _name, module in REGISTERED:
        path = root / module.replace(".", "/")
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), module
    assert ESTIMATORS == ("sdpo", "sdpo_grpo", "gigpo")
    lines = listing("verl").splitlines()
    assert lines[0].startswith("verl:") and len(lines) == 1 + len(REGISTERED)
    assert "agent loop           gui_agent" in listing("verl")
