"""Hydra's config files and a recipe's overrides read without Hydra or OmegaConf, so that `verl-cua recipe export`
runs on the core install: YAML read and written as OmegaConf reads it (`1e-5` is a float, dates stay text), dicts
merged as `OmegaConf.merge` merges them, and the values of Hydra's override grammar that recipes use (numbers, bools,
null, plain and quoted strings, lists, dicts; interpolations kept as text). Anything else (sweeps, functions,
deletions, `@package` keys, escapes) is refused in one line rather than guessed; tests compare it with Hydra's own
parser."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

# OmegaConf's floats: a dot or an exponent (YAML 1.1 wants both a dot and a signed exponent), inf and nan
_DIGITS = r"[0-9](?:_?[0-9])*"
_YAML_FLOAT = re.compile(
    rf"^[-+]?(?:{_DIGITS}\.[0-9_]*(?:[eE][-+]?[0-9]+)?|{_DIGITS}[eE][-+]?[0-9]+|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|\.(?:inf|Inf|INF))$|^\.(?:nan|NaN|NAN)$"
)
_FLOAT_START = list("-+0123456789.")
TIMESTAMP = "tag:yaml.org,2002:timestamp"

# Hydra's override grammar: keys, and the primitives its values are made of
OVERRIDE = re.compile(r"^(?P<prefix>~|\+\+|\+)?(?P<key>[A-Za-z_][\w.\-/]*)(?P<package>@[\w.:]*)?=(?P<value>.*)$", re.S)
INT = re.compile(r"^[-+]?(?:0|[1-9](?:_?[0-9])*)$")
FLOAT = re.compile(
    rf"^[-+]?(?:(?:(?:{_DIGITS})?\.{_DIGITS}|{_DIGITS}\.)(?:[eE][-+]?{_DIGITS})?|{_DIGITS}[eE][-+]?{_DIGITS}"
    r"|[Ii][Nn][Ff]|[Nn][Aa][Nn])$"
)
PLAIN = re.compile(r"^[\w\-+./:$*%@?| ]+$")  # the characters Hydra's grammar takes in an unquoted string


class PlainConfigError(ValueError):
    """An override or a value this reader does not fold (it would need Hydra's own parser)."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with OmegaConf's floats and without timestamps."""


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper that quotes the strings `_Loader` would read as floats."""


for _cls in (_Loader, _Dumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, _FLOAT_START)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != TIMESTAMP]
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str) -> Any:
    """A YAML document as OmegaConf would read it, as plain Python (dicts, lists, scalars)."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader


def dump_yaml(data: Any) -> str:
    """`data` as block YAML in insertion order, read back by OmegaConf (and `load_yaml`) to the same values."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def merge(base: Any, other: Any) -> Any:
    """`other` merged into a copy of `base` as `OmegaConf.merge` merges: dicts key by key, anything else replaced."""
    if not (isinstance(base, dict) and isinstance(other, dict)):
        return _copy(other)
    out = {key: _copy(value) for key, value in base.items()}
    for key, value in other.items():
        out[key] = merge(out[key], value) if key in out else _copy(value)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def update(config: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted `key` in `config` (adding the dicts on its way), merging a dict value into a dict already there."""
    *parents, last = key.split(".")
    node = config
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = merge(node[last], value) if isinstance(node.get(last), dict) else _copy(value)


@dataclass(frozen=True)
class Override:
    """One `key=value` override: its prefix (`""`, `+`, `++`), dotted key, parsed value, and the text it came from."""

    prefix: str
    key: str
    value: Any
    text: str


def parse_override(text: str) -> Override:
    """`key=value`, `+key=value` or `++key=value` with a value of the grammar's plain forms; PlainConfigError else."""
    match = OVERRIDE.match(text)
    if match is None or match["prefix"] == "~" or match["package"]:
        raise PlainConfigError(f"override {text!r} cannot be folded into a config file")
    return Override(match["prefix"] or "", match["key"], parse_value(match["value"], text), text)


def parse_value(text: str, override: str = "") -> Any:
    """A value of Hydra's override grammar: null, bool, int, float, a quoted or plain string, a list or a dict."""
    value = text.strip()
    if value.startswith(("[", "{")):
        return _container(value, override or text)
    if len(_split(value, override or text)) > 1:
        raise PlainConfigError(f"override {override or text!r} is a sweep (a comma-separated value)")
    return _primitive(value, override or text)


def _primitive(value: str, override: str) -> Any:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" and value[0] not in value[1:-1]:
        if "\\" in value:
            raise PlainConfigError(f"override {override!r}: escapes in a quoted string need Hydra's parser")
        return value[1:-1]
    lowered = value.lower()
    if lowered == "null":
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    if INT.match(value):
        return int(value.replace("_", ""))
    if FLOAT.match(value):
        return float(value.replace("_", ""))
    if "${" in value:
        return value  # an interpolation: OmegaConf resolves it when the config is read
    if value and not PLAIN.match(value):  # functions, escapes, stray quotes or brackets: Hydra's own grammar
        raise PlainConfigError(f"override {override!r}: the value {value!r} needs Hydra's parser")
    return value


def _container(value: str, override: str) -> Any:
    closing = {"[": "]", "{": "}"}[value[0]]
    if not value.endswith(closing):
        raise PlainConfigError(f"override {override!r}: unbalanced {value[0]}")
    inner = value[1:-1].strip()
    items = _split(inner, override) if inner else []
    if value[0] == "[":
        return [parse_value(item, override) for item in items]
    out = {}
    for item in items:
        key, sep, rest = item.partition(":")
        if not sep or not key.strip():
            raise PlainConfigError(f"override {override!r}: {item!r} is not key:value")
        out[key.strip()] = parse_value(rest, override)
    return out


def _split(text: str, override: str) -> list[str]:
    """`text` split at its top-level commas (not inside brackets, braces or quotes)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth or quote:
        raise PlainConfigError(f"override {override!r}: unbalanced brackets or quotes")
    return [*parts, text[start:]]
