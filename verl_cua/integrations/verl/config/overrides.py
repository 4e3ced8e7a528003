"""The command line's `cua.*` overrides checked against the schema before Hydra composes anything: an unknown key is
one line naming the closest valid keys (Hydra's own refusal is 7 lines advising `+`, and `+cua.env.nmae=x` would only
fail after the whole config is composed). Keys under a mapping field (`cua.env.kwargs.*`) are free. No ML stack."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from verl_cua.integrations.verl.config.fields import CuaConfigError, Section, base_type, field_docs
from verl_cua.integrations.verl.config.schema import CuaConfig

MAX_CLOSEST = 3
PREFIXES = ("++", "+", "~")  # Hydra's: force-add, add, delete


def override_key(arg: str) -> str | None:
    """The config key a Hydra override sets or deletes (`+cua.env.name=x` -> `cua.env.name`); None for a flag."""
    if arg.startswith("-"):
        return None
    for prefix in PREFIXES:
        if arg.startswith(prefix):
            arg = arg[len(prefix) :]
            break
    key = arg.partition("=")[0].strip()
    return key.partition("@")[0] or None  # `key@package=...`: the key before Hydra's package


def schema_keys(root: type[Section] = CuaConfig, prefix: str = "cua") -> dict[str, bool]:
    """Every key the schema under `root` has (sections and fields), each with whether it takes free sub-keys."""
    keys: dict[str, bool] = {}
    for name, kind, _ in field_docs(root):
        key = f"{prefix}.{name}"
        if isinstance(kind, type) and issubclass(kind, Section):
            keys[key] = False
            keys.update(schema_keys(kind, key))
        else:
            keys[key] = base_type(kind)[0] is dict
    return keys


def is_known(key: str, keys: dict[str, bool]) -> bool:
    """Whether `key` is in the schema, or below a mapping field that takes any sub-key."""
    if key == "cua" or key in keys:
        return True
    parts = key.split(".")
    return any(keys.get(".".join(parts[:n])) for n in range(2, len(parts)))


def closest(key: str, keys: Iterable[str], n: int = MAX_CLOSEST) -> list[str]:
    """The valid keys nearest to `key` (difflib), best first, among those as deep as it (a field for a field, a
    section for a section); when none is near, the first keys of its section, else the sections."""
    keys = list(keys)
    alike = [k for k in keys if k.count(".") == key.count(".")] or keys
    found = difflib.get_close_matches(key, alike, n=n, cutoff=0.6)
    if not found:
        section = key.rpartition(".")[0]
        found = [k for k in keys if k.rpartition(".")[0] == section][:n] or [k for k in keys if k.count(".") == 1]
    return found


def check_cua_overrides(args: Iterable[str], sections: tuple[str, ...] | None = None) -> None:
    """Raise `CuaConfigError` (one line) on the first override of a `cua.*` key the schema lacks (`sections`: only
    these sections count, for a host that reads no other: the line then lists every key it reads)."""
    keys = schema_keys()
    if sections is not None:
        keys = {k: free for k, free in keys.items() if k.split(".")[1] in sections}
    for arg in args:
        key = override_key(arg)
        if key is None or not (key == "cua" or key.startswith("cua.")):
            continue
        if is_known(key, keys):
            continue
        if sections is not None:
            raise CuaConfigError(
                f"unknown key {key}; this trainer reads {', '.join(k for k in keys if k.count('.') > 1)}"
            )
        raise CuaConfigError(f"unknown key {key}; closest: {', '.join(closest(key, keys))}")
