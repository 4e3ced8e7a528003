"""`plain_config` reads what `recipe export` needs without Hydra or OmegaConf; here (where both are installed) it is
compared with them: override values as Hydra's parser reads them, YAML as OmegaConf reads it, and YAML it writes as
OmegaConf reads it back. What it cannot read as Hydra does, it refuses."""

import importlib.resources

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from verl_cua.recipe_export.catalog import exportable_names, recipes_dir
from verl_cua.recipe_export.config import default_overrides
from verl_cua.recipe_export.plain_config import PlainConfigError, dump_yaml, load_yaml, merge, parse_override

VALUES = [
    "", "0", "-1", "+7", "1_000", "8192", "1e-5", "2e-3", "1.0", "-0.5", ".5", "5.", "1.5e+3", "inf", "-inf", "nan",
    "true", "False", "TRUE", "null", "NULL", "none", "docker", "Qwen/Qwen3-VL-8B-Instruct", ".*visual.*",
    "data/osworld/train.parquet", "[console,wandb]", "[]", "[1, 2.5, x]", "{a:1,b:[x,y]}", "'quoted, with comma'",
    '"double"', "${oc.env:HOME}", "${trainer.project_name}/x", "hello world", "a:b", "08", "1.2.3", "-", "a$b", "x|y",
]  # fmt: skip
REFUSED = ["a,b", "choice(1,2)", "range(3)", "'esc\\'aped'", "f(x)", "[a", "x=y", "~x", "a\\,b", "it's"]


def _hydra(text: str):
    (override,) = OverridesParser.create().parse_overrides([text])
    return override


@pytest.mark.parametrize("value", VALUES)
def test_values_read_as_hydra_reads_them(value):
    ours, theirs = parse_override(f"key={value}").value, _hydra(f"key={value}").value()
    assert ours == theirs or (ours != ours and theirs != theirs)  # nan
    assert type(ours) is type(theirs), (value, ours, theirs)


@pytest.mark.parametrize("value", REFUSED)
def test_what_needs_hydras_parser_is_refused(value):
    with pytest.raises(PlainConfigError):
        parse_override(f"key={value}")


@pytest.mark.parametrize("text", ["~key", "~key=1", "key@pkg=1", "+group@pkg=x", "no_equals"])
def test_deletions_packages_and_non_overrides_are_refused(text):
    with pytest.raises(PlainConfigError):
        parse_override(text)


def test_every_exportable_recipes_overrides_read_as_hydra_reads_them():
    for name in exportable_names():
        overrides, _ = default_overrides(recipes_dir() / f"run_{name}.sh")
        for text, theirs in zip(overrides, OverridesParser.create().parse_overrides(overrides), strict=True):
            ours = parse_override(text)
            assert (ours.key, ours.value) == (theirs.key_or_group, theirs.value()), text
            assert ours.prefix == {"ADD": "+", "FORCE_ADD": "++"}.get(theirs.type.name, "")


def test_our_config_files_read_as_omegaconf_reads_them():
    root = importlib.resources.files("verl_cua.integrations.verl.config")
    files = [p for p in root.rglob("*.yaml")] if hasattr(root, "rglob") else []
    assert len(files) >= 4
    for path in files:
        text = path.read_text()
        assert load_yaml(text) == OmegaConf.to_container(OmegaConf.create(text)), path
    tricky = "a: 1e-5\nb: 2024-01-01\nc: .inf\nd: 1_000\ne: '1e-5'\nf: 0.1\ng: 12:30\n"
    assert load_yaml(tricky) == OmegaConf.to_container(OmegaConf.create(tricky))


text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=12)  # YAML's own breaks out
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text,
    st.sampled_from(["1e-5", "2024-01-01", "yes", "no", "n", "on", "null", "~", ".inf", "12:30", "0x1F", "1_0"]),
)  # fmt: skip
trees = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    text.filter(lambda k: k and "${" not in k), inner, max_size=3), max_leaves=12)  # fmt: skip


@settings(deadline=None)
@given(st.dictionaries(text.filter(bool), trees, max_size=4))
def test_written_yaml_reads_back_the_same_in_omegaconf(data):
    data = {k: v for k, v in data.items() if not _has_interpolation(v)}
    text = dump_yaml(data)
    assert OmegaConf.to_container(OmegaConf.create(text)) == data == load_yaml(text) or data == {}


def _has_interpolation(value) -> bool:
    if isinstance(value, dict):
        return any(_has_interpolation(k) or _has_interpolation(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_interpolation(v) for v in value)
    return isinstance(value, str) and ("${" in value or "\\" in value)


def test_merge_is_omegaconfs_for_dicts_lists_and_nulls():
    base = {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": None, "g": 1}
    other = {"a": {"c": [3], "d": None, "new": {"x": 1}}, "f": {"y": 2}, "g": [1]}
    assert merge(base, other) == OmegaConf.to_container(OmegaConf.merge(base, other))
    assert base["a"]["c"] == [1, 2]  # inputs untouched
