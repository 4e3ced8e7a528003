"""`verl-cua config QUERY`: the keys a query names (`cua.env.max_steps`, `env.max_steps`, `env`, `max_steps`), and a
one-line "did you mean" from the real keys when it names none."""

from __future__ import annotations

import difflib

from verl_cua.integrations.verl.config.docs import KeyDoc, key_docs
from verl_cua.integrations.verl.config.fields import CuaConfigError

MAX_SUGGESTIONS = 3


def find_keys(query: str | None, docs: list[KeyDoc] | None = None) -> list[KeyDoc]:
    """The keys `query` names: every key (None, `cua`), a section (`cua.env`, `env`), one key (`cua.env.max_steps`,
    `env.max_steps`), or a key's last part (`max_steps`: every section that has it). CuaConfigError otherwise."""
    docs = key_docs() if docs is None else docs
    name = (query or "").strip().removeprefix("cua.")
    if name in ("", "cua"):
        return docs
    found = [d for d in docs if name in (d.section, f"{d.section}.{d.name}")] or [d for d in docs if d.name == name]
    if not found:
        raise CuaConfigError(_unknown(query or "", name, docs))
    return found


def _unknown(query: str, name: str, docs: list[KeyDoc]) -> str:
    """The one-line error for a query that names nothing: the closest real keys and sections, or the sections."""
    spelled: dict[str, list[str]] = {}  # how a query may spell a key or section -> the full names it stands for
    for d in docs:
        for form, full in ((d.section, f"cua.{d.section}"), (f"{d.section}.{d.name}", d.key), (d.name, d.key)):
            spelled.setdefault(form, [])
            spelled[form] += [full] if full not in spelled[form] else []
    close = difflib.get_close_matches(name, spelled, n=MAX_SUGGESTIONS * 2, cutoff=0.6)
    suggestions = list(dict.fromkeys(full for form in close for full in spelled[form]))[:MAX_SUGGESTIONS]
    if suggestions:
        return f"no key or section {query!r}; did you mean {', '.join(suggestions)}?"
    sections = ", ".join(dict.fromkeys(d.section for d in docs))
    return f"no key or section {query!r}; sections: {sections} (verl-cua config lists every key)"
