"""One registry type for verl-cua's named plug-ins (action formats, chat APIs, envs): register, look up, list.

Standard library only: the registries live in layers that must import without torch, verl or ray. Packages outside
verl-cua add to them through the `verl_cua.plugins` entry-point group: each module listed there is imported once per
process (its `register_*` calls run) before any registry is first read, in the trainer's Ray workers as anywhere.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

T = TypeVar("T")
PLUGIN_GROUP = "verl_cua.plugins"
_plugins: dict[str, str] = {}  # entry-point name -> module, of the plugins loaded
_plugins_loaded = False


def load_plugins() -> dict[str, str]:
    """Import every module of the `verl_cua.plugins` entry-point group, once per process; a plugin that fails to
    import is named in one warning line (its names stay unknown) and the others load. Returns name -> module."""
    global _plugins_loaded
    if _plugins_loaded:
        return dict(_plugins)
    _plugins_loaded = True  # first: a plugin that reads a registry while it loads must not load plugins again
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            ep.load()
        except Exception as exc:  # a third party's bug: say so, keep verl-cua and the other plugins working
            warnings.warn(
                f"verl-cua plugin {ep.name!r} ({ep.value}) failed to load, its registrations are missing: "
                f"{type(exc).__name__}: {exc}",
                stacklevel=2,
            )
            continue
        _plugins[ep.name] = ep.value
    return dict(_plugins)


def resolve(value: Any) -> Any:
    """A lazy `"module:name"` reference imported (attributes may be dotted); anything else as it is."""
    if not isinstance(value, str):
        return value
    module_name, _, attr = value.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        target = getattr(target, part)
    return target


def defined_in(value: Any) -> str:
    """Where a registered value is defined, as `module:Name`: a lazy `"module:Name"` entry point is its own answer;
    a record that names its `origin` (an `EnvSpec`) says it; a class or function its own `module:qualname`; any
    other object its class's."""
    if isinstance(value, str):
        return value
    origin = getattr(value, "origin", None)
    if isinstance(origin, str):
        return origin
    target = value if hasattr(value, "__qualname__") else type(value)
    return f"{target.__module__}:{target.__qualname__}"


def same_definition(a: Any, b: Any) -> bool:
    """Whether two registrations are one: equal, or defined at the same named place (a reloaded module, a class and
    its `"module:Name"` string); lambdas and local functions are one only when equal."""
    if a == b:
        return True
    where = defined_in(a)
    return where == defined_in(b) and "<" not in where


class Registry(MutableMapping[str, T], Generic[T]):
    """Names -> registered values, read like a dict; `add` checks duplicates, `lookup` names the valid choices."""

    def __init__(self, kind: str, plural: str, extra_valid: tuple[str, ...] = ()) -> None:
        self.kind = kind  # "action format": the word errors use
        self.plural = plural  # "formats": "valid formats: ..."
        self.extra_valid = extra_valid  # names accepted beside the registered ones (`auto` for formats)
        self._values: dict[str, T] = {}
        self._built_in: frozenset[str] = frozenset()

    def add(self, name: str, value: T) -> T:
        """Register `value` as `name`; a different value under a taken name raises ValueError (one line)."""
        if name in self._values and not same_definition(self._values[name], value):
            where = f"{defined_in(self._values[name])} vs {defined_in(value)}"
            raise ValueError(f"{self.kind} {name!r} is already registered: {where}")
        self._values[name] = value
        return value

    def mark_built_in(self) -> None:
        """Call once verl-cua's own registrations are in: what is registered now is built in (the docs list it)."""
        self._built_in = frozenset(self._values)

    def built_in(self) -> list[str]:
        """The names verl-cua itself registers, sorted (whatever plug-ins or tests add later)."""
        return sorted(name for name in self._built_in if name in self._values)

    def registered(self, name: str) -> T | None:
        """What is registered as `name` so far, without loading plug-ins (for code that registers)."""
        return self._values.get(name)

    def register(self, name: str) -> Callable[[type], type]:
        """Class decorator: register one instance of the class as `name`, with its `name` attribute set."""

        def decorator(cls: type) -> type:
            instance = cls()
            instance.name = name
            self.add(name, instance)
            return cls

        return decorator

    def lookup(self, name: str) -> T:
        """The value registered as `name`; an unknown name raises ValueError listing the valid ones."""
        load_plugins()
        try:
            return self._values[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            raise ValueError(f"unknown {self.kind} {name!r}; valid {self.plural}: {', '.join(self.valid())}") from None

    def valid(self) -> list[str]:
        """Every name `lookup` or its callers accept: the registered ones sorted, then the extra ones."""
        load_plugins()
        return [*sorted(self._values), *self.extra_valid]

    def origins(self) -> dict[str, str]:
        """Each registered name, sorted, with where its value is defined (`module:Name`)."""
        load_plugins()
        return {name: defined_in(self._values[name]) for name in sorted(self._values)}

    def __getitem__(self, name: str) -> T:
        load_plugins()
        return self._values[name]

    def __setitem__(self, name: str, value: T) -> None:
        self.add(name, value)  # the same check as `add`: `registry[name] = other` cannot replace silently

    def __delitem__(self, name: str) -> None:
        del self._values[name]

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return iter(list(self._values))

    def __len__(self) -> int:
        load_plugins()
        return len(self._values)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._values)})"
