"""The machinery of the typed `cua.*` config (the dataclasses are in `config.schema`): `setting` declares a field with
its default, help and valid values or bounds; `Section` is a frozen dataclass that also reads as a mapping (verl's
`BaseConfig` feel, without importing verl) and checks a mapping against its fields. No torch, no verl."""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from verl_cua.algos.entropulse import SCHEDULES
from verl_cua.algos.gigpo import NORMS

ROW_LAYOUTS = ("episode", "step")
IMAGE_STORAGES = ("png", "pixel_values")
PLANNER_MODES = ("none", "recorded", "online")  # cua.planner.mode ("off" would read as false in YAML)
SDPO_TEACHERS = ("current", "ema", "frozen")
SDPO_LOSSES = ("logit", "token")
SDPO_NORMALIZE = ("reprompted", "all")
GIGPO_NORMS = NORMS  # the algorithm's own list (verl_cua.algos.gigpo)
GIGPO_ANCHORS = ("screen", "screenshot", "a11y")
ENTROPULSE_SCHEDULES = SCHEDULES  # the algorithm's own list (verl_cua.algos.entropulse)

S = TypeVar("S", bound="Section")


class CuaConfigError(ValueError):
    """A `cua.*` key or value that does not exist; the message names the valid ones."""


def env_names() -> tuple[str, ...]:
    """The env names `cua.env.name` accepts: every env registered with `verl_cua.envs.register_env`."""
    from verl_cua.envs import ENV_REGISTRY

    return tuple(ENV_REGISTRY.valid())


def env_names_text() -> str:
    """`cua.env.name`'s valid values in words, for the reference and `verl-cua config`: the built-in envs and any
    registered (the reference is the same whatever plug-ins are installed)."""
    from verl_cua.envs import ENV_REGISTRY

    return " | ".join(ENV_REGISTRY.built_in()) + " | an env added with verl_cua.envs.register_env"


def trainable_formats() -> tuple[str, ...]:
    """The formats `cua.action.format` accepts: every registered format whose spec says `trainable`."""
    from verl_cua.actions.formats import trainable_formats as registered

    return registered()


def trainable_formats_text() -> str:
    """`cua.action.format`'s valid values in words: the built-in trainable formats and any registered."""
    from verl_cua.actions.formats import FORMAT_REGISTRY

    built_in = [name for name in trainable_formats() if name in FORMAT_REGISTRY.built_in()]
    return " | ".join(built_in) + " | a trainable format added with verl_cua.actions.register_format"


def format_names() -> tuple[str, ...]:
    """Every registered action format (an executor's reply need not be a trainable one)."""
    from verl_cua.actions.formats import FORMAT_REGISTRY

    return tuple(FORMAT_REGISTRY.valid())


def executor_kinds() -> tuple[str, ...]:
    """The executor kinds `cua.executor.kind` accepts."""
    from verl_cua.eval.executor import EXECUTORS

    return tuple(EXECUTORS.valid())


def planner_spec_names() -> tuple[str, ...]:
    """The planner specs `cua.planner.spec` accepts."""
    from verl_cua.actions.planner import PLANNER_SPECS

    return tuple(PLANNER_SPECS.valid())


def setting(default: Any, help: str, **valid: Any) -> Any:
    """A dataclass field with its default and its metadata: `help`, and `choices`, `low`, `high` (`low_open`,
    `high_open`: the bound excluded) where they apply (`choices` may be a function; `valid`, a text or a function
    returning one, then says in words what it accepts). A class as default: a fresh instance of it for every config
    (nested sections)."""
    metadata = {"help": help, **valid}
    if isinstance(default, type):
        return field(default_factory=default, metadata=metadata)
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Section(Mapping):
    """One `cua.<section>`: frozen fields, also readable as a mapping (`cfg["key"]`, `cfg.get`, `dict(cfg)`)."""

    def __getitem__(self, key: str) -> Any:
        """The field `key` (KeyError when there is none)."""
        if key not in field_names(type(self)):
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        """The field names, in declaration order."""
        return iter(field_names(type(self)))

    def __len__(self) -> int:
        """The number of fields."""
        return len(field_names(type(self)))

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts (what OmegaConf.to_container gives for the same config)."""
        return asdict(self)

    @classmethod
    def from_mapping(cls: type[S], body: Mapping[str, Any] | None, prefix: str = "cua") -> S:
        """Check `body` against the fields (unknown key or bad value: one-line `CuaConfigError`); missing keys take
        their defaults and nested sections are built."""
        body = _plain(body)
        if not isinstance(body, Mapping):
            raise CuaConfigError(f"{prefix} must be a mapping of keys, got {body!r}")
        names = field_names(cls)
        for key in body:
            if key not in names:
                raise CuaConfigError(f"unknown key {prefix}.{key}; valid: {', '.join(names)}")
        hints = _hints(cls)
        values = {}
        for f in fields(cls):
            if f.name in body:
                values[f.name] = check_value(f"{prefix}.{f.name}", body[f.name], hints[f.name], f.metadata)
        return cls(**values)

    @classmethod
    def of(cls: type[S], value: Mapping[str, Any] | None) -> S:
        """`value` itself when it is already this section, else `from_mapping(value)` (plain dicts of callers)."""
        return value if isinstance(value, cls) else cls.from_mapping(value)


def field_names(cls: type) -> tuple[str, ...]:
    """The field names of a section class, in declaration order."""
    return tuple(f.name for f in fields(cls))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _plain(value: Any) -> Any:
    """An OmegaConf container as plain Python (interpolations resolved); anything else as it is."""
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(value, resolve=True)
    return value


def check_value(key: str, value: Any, kind: Any, meta: Mapping[str, Any]) -> Any:
    """The value field `key` of type `kind` takes (ints widened for float fields, sections built), or a one-line
    `CuaConfigError` naming the valid values or bounds."""
    if isinstance(kind, type) and issubclass(kind, Section):
        return kind.from_mapping(value or {}, key)
    choices = meta.get("choices")
    if choices is not None:
        valid = choices() if callable(choices) else choices
        if value not in valid:
            raise CuaConfigError(f"{key}={value!r} is not valid; valid: {', '.join(valid)}")
        return value
    base, optional = base_type(kind)
    if value is None and optional:
        return None
    null = "; null is also valid" if optional else ""
    low, high = meta.get("low"), meta.get("high")
    bounds = (low, high, meta.get("low_open", False), meta.get("high_open", False))
    if base is bool:
        if not isinstance(value, bool):
            raise CuaConfigError(f"{key} must be true or false, got {value!r}")
    elif base is int:
        if not isinstance(value, int) or isinstance(value, bool) or not _within(value, *bounds):
            raise CuaConfigError(f"{key} must be {describe_bounds(int, *bounds)}, got {value!r}{null}")
    elif base is float:
        if not isinstance(value, int | float) or isinstance(value, bool) or not _within(value, *bounds):
            raise CuaConfigError(f"{key} must be {describe_bounds(float, *bounds)}, got {value!r}{null}")
        return float(value)
    elif base is str:
        if not isinstance(value, str):
            raise CuaConfigError(f"{key} must be a string, got {value!r}{null}")
    elif base is dict:
        if not isinstance(value, Mapping):
            raise CuaConfigError(f"{key} must be a mapping of keyword arguments, got {value!r}")
        return dict(value)
    return value


def _within(value: float, low: float | None, high: float | None, low_open: bool, high_open: bool) -> bool:
    above = low is None or (value > low if low_open else value >= low)
    below = high is None or (value < high if high_open else value <= high)
    return above and below


def base_type(kind: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed) of a field annotation."""
    args = typing.get_args(kind)
    if type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return base_type(rest[0])[0], True
    return typing.get_origin(kind) or kind, False


def describe_bounds(
    base: type, low: float | None, high: float | None, low_open: bool = False, high_open: bool = False
) -> str:
    """What a number field accepts, in the words of the error messages: "a positive integer", "a number in [0, 1]",
    "a number in (0, 1]" (`low_open`/`high_open`: the bound itself excluded)."""
    if base is int:
        if low == 1 and high is None:
            return "a positive integer"
        return "an integer" + (f" >= {low:g}" if low is not None else "")
    if high is not None:
        return f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    return "a number" + (f" {'>' if low_open else '>='} {low:g}" if low is not None else "")


def type_name(kind: Any) -> str:
    """A field annotation in words: int, float, bool, str, mapping, "float or null"."""
    base, optional = base_type(kind)
    name = "mapping" if base is dict else getattr(base, "__name__", str(base))
    return f"{name} or null" if optional else name


def field_docs(cls: type) -> list[tuple[str, Any, Any]]:
    """(name, annotation, dataclasses.Field) of each field of a section class, for documentation."""
    hints = _hints(cls)
    return [(f.name, hints[f.name], f) for f in fields(cls)]
