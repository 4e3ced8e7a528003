"""`python -m verl_cua.main --help` lists every `cua.*` key with its default and meaning, with or without the ML
stack; with it, Hydra's own help follows."""

import subprocess
import sys

import pytest

from verl_cua.integrations.verl.config.schema import CuaConfig


def _expected_lines() -> list[str]:
    """`cua.<section>.<key> = <default>` for every dataclass field, in the listing's words."""
    from verl_cua.integrations.verl.config.docs import yaml_scalar

    return [
        f"cua.{name}.{key} = {yaml_scalar(value)}"
        for name, section in CuaConfig().items()
        for key, value in section.items()
    ]


def _help_lines(out: str) -> list[str]:
    return [line.strip().split("  [")[0] for line in out.splitlines() if line.startswith("  cua.")]


@pytest.mark.e2e
def test_help_lists_every_key_then_hydras_help():
    proc = subprocess.run(
        [sys.executable, "-m", "verl_cua.main", "--help"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _help_lines(proc.stdout) == _expected_lines()
    assert "traced episodes per traced step sent to trainer.logger" in proc.stdout  # the meaning, not just the key
    ours, hydra = proc.stdout.index("cua.env.name = "), proc.stdout.index("== Config ==")
    assert ours < hydra and "Powered by Hydra" in proc.stdout


def test_help_without_verl_still_lists_every_key_and_names_the_install():
    script = (
        "import sys, runpy\n"
        "for name in ('verl', 'torch', 'hydra'):\n"
        "    sys.modules[name] = None\n"
        "sys.argv = ['verl_cua.main', '--help']\n"
        "runpy.run_module('verl_cua.main', run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _help_lines(proc.stdout) == _expected_lines()
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("Hydra's help (every trainer key) needs verl, hydra-core, torch; install with: pip install")
    assert "'verl-cua[verl]'" in last
