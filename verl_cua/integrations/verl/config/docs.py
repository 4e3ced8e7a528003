"""Every `cua.*` key written out from the dataclasses of `config.schema`: config/cua/default.yaml (Hydra's defaults),
docs/config.md, and the plain-text listing of `python -m verl_cua.main --help` and `verl-cua config`.

`python -m verl_cua.integrations.verl.config.docs --write` rewrites both files; `--check` exits 1 when either is
stale."""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.integrations.verl.config.fields import CuaConfigError, base_type, describe_bounds, field_docs, type_name
from verl_cua.integrations.verl.config.schema import CuaConfig

COMMAND = "python -m verl_cua.integrations.verl.config.docs --write"
DEFAULTS_YAML = Path(__file__).parent / "cua" / "default.yaml"
DOCS_MD = Path(__file__).resolve().parents[4] / "docs" / "config.md"
INTRO = (
    "verl-cua's own settings live under `cua.*` in the trainer config (`python -m verl_cua.main`, Hydra config "
    "`cua_trainer` on verl's `ppo_trainer`); set any of them as a Hydra override, e.g. `cua.env.max_steps=10`, "
    "and add keys under `cua.env.kwargs` with a `+`. Every key, its default and its valid values come from the "
    "dataclasses in `verl_cua/integrations/verl/config/schema.py`; an unknown key or a bad value stops the run before "
    "Ray starts with one line naming the valid ones. `verl-cua config` prints this list; `verl-cua config QUERY` one "
    "section or key, however it is spelled (`cua.env`, `env.max_steps`, `max_steps`), and a misspelt one names the "
    "closest real keys."
)
PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class KeyDoc:
    """One `cua.<section>.<name>` key as the documents show it."""

    section: str
    name: str
    type: str
    default: str
    valid: str
    help: str

    @property
    def key(self) -> str:
        """The full dotted key."""
        return f"cua.{self.section}.{self.name}"


def yaml_scalar(value: Any) -> str:
    """A default as YAML (and as the listings show it): null, true, 0.05, miniwob, {}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if (
        isinstance(value, str)
        and PLAIN.fullmatch(value)
        and value.lower() not in ("null", "true", "false", "yes", "no")
    ):
        return value
    return json.dumps(value)  # JSON is YAML flow syntax: quoted strings, {} and {"k": v}


def valid_text(kind: Any, meta: Any) -> str:
    """What a field accepts, in words: `a | b`, "a positive integer", "a number in [0, 1]", "true | false"."""
    base, optional = base_type(kind)
    if "valid" in meta:
        text = meta["valid"]() if callable(meta["valid"]) else meta["valid"]
    elif meta.get("choices") is not None:
        text = " | ".join(meta["choices"]() if callable(meta["choices"]) else meta["choices"])
    elif base is bool:
        text = "true | false"
    elif base in (int, float):
        text = describe_bounds(
            base, meta.get("low"), meta.get("high"), meta.get("low_open", False), meta.get("high_open", False)
        )
    elif base is dict:
        text = "a mapping"
    else:
        text = "a string"
    return f"{text} | null" if optional else text


def key_docs(section: str | None = None) -> list[KeyDoc]:
    """Every `cua.*` key (or those of one section) in declaration order."""
    sections = section_docs()
    if section is not None and section not in sections:
        raise CuaConfigError(f"unknown section cua.{section}; valid: {', '.join(sections)}")
    defaults = CuaConfig()
    docs = []
    for name, (cls, _help) in sections.items():
        if section not in (None, name):
            continue
        for key, kind, f in field_docs(cls):
            default = yaml_scalar(defaults[name][key])
            docs.append(KeyDoc(name, key, type_name(kind), default, valid_text(kind, f.metadata), f.metadata["help"]))
    return docs


def section_docs() -> dict[str, tuple[type, str]]:
    """{section: (its dataclass, its help)} in declaration order."""
    return {name: (kind, f.metadata["help"]) for name, kind, f in field_docs(CuaConfig)}


def listing(section: str | None = None, keys: list[KeyDoc] | None = None) -> str:
    """The plain-text listing: each key (of `section`, or `keys`) with its default, valid values and meaning, grouped
    by section."""
    lines = [
        "verl-cua's cua.* keys (Hydra overrides, e.g. cua.env.max_steps=10; docs/config.md has the same list):",
    ]
    current = None
    for doc in key_docs(section) if keys is None else keys:
        if doc.section != current:
            current = doc.section
            lines += ["", f"cua.{current}: {section_docs()[current][1]}"]
        lines.append(f"  {doc.key} = {doc.default}  [{doc.valid}]")
        lines += textwrap.wrap(doc.help, 116, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines) + "\n"


def _comment(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, 118 - len(indent), initial_indent=f"{indent}# ", subsequent_indent=f"{indent}# ")


def defaults_yaml() -> str:
    """config/cua/default.yaml: every key with its default, its help and valid values as comments."""
    lines = [
        "# GENERATED from the dataclasses of verl_cua/integrations/verl/config/schema.py (edit them, not this file) by",
        f"# `{COMMAND}`.",
        "# verl-cua's own keys (`cua.*`), merged into verl's ppo_trainer config by cua_trainer.yaml; docs/config.md",
        "# lists them. Unknown keys or values fail at start with one line naming the valid ones.",
    ]
    current = None
    for doc in key_docs():
        if doc.section != current:
            current = doc.section
            lines += ["", *_comment(section_docs()[current][1], ""), f"{current}:"]
        lines += _comment(f"{doc.help}. Valid: {doc.valid}.", "  ")
        lines.append(f"  {doc.name}: {doc.default}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def config_markdown() -> str:
    """docs/config.md: one table per section (key, type, default, valid values, meaning)."""
    lines = [
        "# The `cua.*` config",
        "",
        f"<!-- GENERATED from verl_cua/integrations/verl/config/schema.py by `{COMMAND}`: edit the dataclasses. -->",
        "",
        INTRO,
    ]
    current = None
    for doc in key_docs():
        if doc.section != current:
            current = doc.section
            lines += ["", f"## `cua.{current}`", "", section_docs()[current][1], ""]
            lines += ["| key | type | default | valid | meaning |", "| --- | --- | --- | --- | --- |"]
        cells = [f"`{doc.key}`", doc.type, f"`{doc.default}`", _cell(doc.valid), _cell(doc.help)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def generated_files() -> dict[Path, str]:
    """{path: the text it must hold}."""
    return {DEFAULTS_YAML: defaults_yaml(), DOCS_MD: config_markdown()}


def stale_files() -> list[Path]:
    """The generated files whose text on disk differs from what the dataclasses give (or that are missing)."""
    return [p for p, text in generated_files().items() if not p.is_file() or p.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    """`--write`: rewrite default.yaml and docs/config.md; `--check`: exit 1 with one line when either is stale."""
    parser = argparse.ArgumentParser(prog="python -m verl_cua.integrations.verl.config.docs", description=__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite config/cua/default.yaml and docs/config.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when either file is not what --write writes")
    args = parser.parse_args(argv)
    if args.write:
        for path, text in generated_files().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
        return 0
    stale = stale_files()
    if stale:
        names = ", ".join(str(p) for p in stale)
        print(f"config.docs: stale: {names}; regenerate with: {COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
