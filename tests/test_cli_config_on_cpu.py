"""`verl-cua config [QUERY]` prints the `cua.*` keys from the dataclasses: all, a section or one key however it is
spelled (`cua.env`, `env.max_steps`, `max_steps`); a query that names nothing is one line with the closest keys,
exit 2."""

import dataclasses

import pytest

from verl_cua.cli import main
from verl_cua.integrations.verl.config.docs import key_docs, listing
from verl_cua.integrations.verl.config.lookup import find_keys
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


@pytest.mark.parametrize(
    ("query", "keys"),
    [
        ("cua.gigpo", ["cua.gigpo.gamma", "cua.gigpo.step_weight", "cua.gigpo.norm", "cua.gigpo.anchor"]),
        ("cua.env.max_steps", ["cua.env.max_steps"]),
        ("env.max_steps", ["cua.env.max_steps"]),
        ("max_steps", ["cua.env.max_steps"]),  # a key's last part, where only one section has it
        ("ema_rate", ["cua.sdpo.ema_rate"]),
        ("cua", None),  # every key
    ],
)
def test_config_finds_a_section_or_key_however_it_is_spelled(capsys, query, keys):
    assert main(["config", query]) == 0
    everything = [f"cua.{name}.{key}" for name, section in CuaConfig().items() for key in section]
    assert _listed(capsys.readouterr().out) == (everything if keys is None else keys)


def test_a_last_part_in_several_sections_lists_every_match():
    docs = key_docs()
    twin = dataclasses.replace(next(d for d in docs if d.key == "cua.gigpo.gamma"), section="replay")
    found = find_keys("gamma", [*docs, twin])
    assert [d.key for d in found] == ["cua.gigpo.gamma", "cua.replay.gamma"]
    assert _listed(listing(keys=found)) == ["cua.gigpo.gamma", "cua.replay.gamma"]


@pytest.mark.parametrize(
    ("query", "first"),
    [("cua.env.max_stepz", "cua.env.max_steps"), ("max_step", "cua.env.max_steps"), ("sdpoo", "cua.sdpo"),
     ("cua.cua.env", "cua.env"), ("trace.dri", "cua.trace.dir")],
)  # fmt: skip
def test_a_typo_is_one_line_with_the_closest_real_keys(capsys, query, first):
    assert main(["config", query]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"verl-cua config: no key or section {query!r}; did you mean ")
    suggested = err.strip().removesuffix("?").split("did you mean ")[1].split(", ")
    assert suggested[0] == first and 1 <= len(suggested) <= 3
    real = {f"cua.{name}" for name in CuaConfig().keys()} | {d.key for d in key_docs()}
    assert set(suggested) <= real


def test_a_query_like_no_key_names_the_sections(capsys):
    assert main(["config", "xyzzy"]) == 2
    err = capsys.readouterr().err.strip()
    valid = ", ".join(f.name for f in dataclasses.fields(CuaConfig))  # every section of the schema, in order
    assert valid.startswith("env, action, trace, sdpo, gigpo, coso, buffer, replay, entropulse")
    assert err == f"verl-cua config: no key or section 'xyzzy'; sections: {valid} (verl-cua config lists every key)"
