"""config/cua/default.yaml and docs/config.md are generated from the `cua.*` dataclasses: the committed files are
current (`--check`), a stale one fails `--check` with one line, and every key has its help in both."""

import subprocess
import sys
from dataclasses import fields

import pytest
import yaml

from verl_cua.integrations.verl.config import docs as config_docs
from verl_cua.integrations.verl.config.schema import CuaConfig


def _keys() -> list[str]:
    return [f"cua.{name}.{key}" for name, section in CuaConfig().items() for key in section]


def test_committed_files_are_what_the_generator_writes():
    proc = subprocess.run(
        [sys.executable, "-m", "verl_cua.integrations.verl.config.docs", "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_a_stale_file_fails_the_check_with_one_line(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "default.yaml"
    stale.write_text(config_docs.defaults_yaml().replace("max_steps: 5", "max_steps: 6"))
    monkeypatch.setattr(config_docs, "DEFAULTS_YAML", stale)
    assert config_docs.main(["--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(stale) in err and "config.docs --write" in err
    assert "docs/config.md" not in err  # only the stale one is named
    assert config_docs.main(["--write"]) == 0 and config_docs.main(["--check"]) == 0
    assert "max_steps: 5" in stale.read_text()


def test_every_section_and_field_has_help():
    for section in fields(CuaConfig):
        assert section.metadata["help"].strip(), section.name
        for f in fields(section.default_factory):
            assert f.metadata.get("help", "").strip(), f"cua.{section.name}.{f.name} has no help"


def test_generated_yaml_holds_every_default_and_its_help():
    text = config_docs.defaults_yaml()
    assert yaml.safe_load(text) == CuaConfig().to_dict()
    assert text.splitlines()[0].startswith("# GENERATED") and config_docs.COMMAND in text
    lines = text.splitlines()
    for i, line in enumerate(lines):  # each key's line follows a comment with its help
        if line.startswith("  ") and not line.lstrip().startswith("#"):
            assert lines[i - 1].lstrip().startswith("# "), line


def test_markdown_lists_every_key_with_type_default_and_meaning():
    md = config_docs.config_markdown()
    rows = {line.split(" | ")[0].strip("| `"): line for line in md.splitlines() if line.startswith("| `cua.")}
    assert list(rows) == _keys()
    assert "| `cua.trace.log_episodes` | int | `0` | an integer >= 0 | traced episodes per traced step" in md
    assert "| `cua.env.rows` | str | `episode` | episode \\| step |" in md
    assert md.count("## `cua.") == len(fields(CuaConfig))


def test_listing_of_one_section_and_an_unknown_one():
    text = config_docs.listing("trace")
    assert "cua.trace.log_episodes = 0  [an integer >= 0]" in text and "  cua.env." not in text
    with pytest.raises(ValueError, match="unknown section cua.nope; valid: env, action, trace"):
        config_docs.listing("nope")
