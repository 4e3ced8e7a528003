"""`verl-cua config [SECTION]` prints the `cua.*` keys from the dataclasses; an unknown section is one line, exit 2."""

import dataclasses

from verl_cua.cli import main
from verl_cua.integrations.verl.config.schema import CuaConfig


def _listed(out: str) -> list[str]:
    return [line.split(" = ")[0].strip() for line in out.splitlines() if line.startswith("  cua.")]


def test_config_lists_every_key(capsys):
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert _listed(out) == [f"cua.{name}.{key}" for name, section in CuaConfig().items() for key in section]
    assert "cua.sdpo.is_clip = 2.0  [a number >= 1 | null]" in out


def test_config_of_one_section(capsys):
    assert main(["config", "gigpo"]) == 0
    assert _listed(capsys.readouterr().out) == ["cua.gigpo.gamma", "cua.gigpo.step_weight", "cua.gigpo.norm",
                                                "cua.gigpo.anchor"]  # fmt: skip


def test_config_of_an_unknown_section_names_the_valid_ones(capsys):
    assert main(["config", "sdpoo"]) == 2
    err = capsys.readouterr().err.strip()
    valid = ", ".join(f.name for f in dataclasses.fields(CuaConfig))  # every section of the schema, in order
    assert valid.startswith("env, action, trace, sdpo, gigpo, buffer, replay, entropulse")
    assert err == f"verl-cua config: unknown section cua.sdpoo; valid: {valid}"
