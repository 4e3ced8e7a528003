"""Sizes and counts that are not positive integers are refused in one line naming the key, before Ray starts
(`config.sizes` for verl's keys, the schema's bounds for `cua.*`): on the composed trainer config, in the doctor's
and the trainer's shared checks, and through `python -m verl_cua.main` (verl's own check was a traceback)."""

import subprocess
import sys
import typing

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from verl_cua.integrations.verl.config.checks import validate_cua_config
from verl_cua.integrations.verl.config.fields import CuaConfigError, base_type, field_docs
from verl_cua.integrations.verl.config.prepare import prepare_config
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.config.sizes import MISSING, POSITIVE, check_sizes, lookup

CONFIG_MODULE = "verl_cua.integrations.verl.config"


@pytest.fixture(scope="module")
def composed():
    with initialize_config_module(CONFIG_MODULE, version_base=None):
        return compose("cua_trainer", overrides=["preset=cpu"])


def _resolved(config, **values):
    plain = OmegaConf.to_container(config, resolve=True)
    for key, value in values.items():
        *parents, name = key.split(".")
        node = plain
        for part in parents:
            node = node[part]
        node[name] = value
    return plain


def test_every_registered_key_is_in_the_composed_config_and_it_passes(composed):
    plain = _resolved(composed)
    assert [key for key in POSITIVE if lookup(plain, key) is MISSING] == []  # a renamed key would go unchecked
    check_sizes(plain)  # the negative control: the preset's own values hold


@pytest.mark.parametrize("key", sorted(POSITIVE))
@pytest.mark.parametrize("value", [-4, 0, True, 2.0, "four"])
def test_a_non_positive_size_is_one_line_naming_the_key(composed, key, value):
    with pytest.raises(CuaConfigError) as exc:
        check_sizes(_resolved(composed, **{key: value}))
    null = "; null is also valid" if POSITIVE[key] else ""
    assert str(exc.value) == f"{key} must be a positive integer, got {value!r}{null}"


@pytest.mark.parametrize("key", sorted(POSITIVE))
def test_null_is_valid_only_where_verl_derives_the_value(composed, key):
    plain = _resolved(composed, **{key: None})
    if POSITIVE[key]:
        check_sizes(plain)
    else:
        with pytest.raises(CuaConfigError, match=rf"^{key} must be a positive integer, got None$"):
            check_sizes(plain)
    check_sizes(_resolved(composed, **{key: 3}))


def test_the_shared_checks_refuse_before_verls(composed):
    """prepare_config runs in `checked_config` (before verl's validate_config and Ray) and in the doctor."""
    with initialize_config_module(CONFIG_MODULE, version_base=None):
        bad = compose("cua_trainer", overrides=["preset=cpu", "data.train_batch_size=-4"])
    with pytest.raises(CuaConfigError, match=r"^data\.train_batch_size must be a positive integer, got -4$"):
        prepare_config(bad)


def _int_fields():
    for section, cls in ((name, typing.get_type_hints(CuaConfig)[name]) for name in CuaConfig().keys()):
        for name, kind, field in field_docs(cls):
            if base_type(kind)[0] is int:
                yield f"cua.{section}.{name}", field.metadata


def test_every_cua_integer_has_a_lower_bound_and_sizes_are_positive():
    ints = dict(_int_fields())
    assert [key for key, meta in ints.items() if meta.get("low") is None] == []
    may_be_zero = {key for key, meta in ints.items() if meta["low"] == 0}
    assert may_be_zero == {"cua.env.idle_envs", "cua.trace.log_episodes", "cua.executor.retries"}  # 0: none
    assert {"cua.env.max_steps", "cua.action.max_tokens_per_step", "cua.env.pool_size"} <= ints.keys() - may_be_zero


@pytest.mark.parametrize("key", [key for key, meta in _int_fields() if meta["low"] == 1])
def test_a_cua_size_of_zero_is_one_line_naming_the_key(key):
    _, section, name = key.split(".")
    with pytest.raises(CuaConfigError) as exc:
        validate_cua_config({section: {name: 0}})
    assert str(exc.value) == f"{key} must be a positive integer, got 0"


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("override", "line"),
    [("data.train_batch_size=-4", "verl-cua: data.train_batch_size must be a positive integer, got -4"),
     ("actor_rollout_ref.rollout.n=0", "verl-cua: actor_rollout_ref.rollout.n must be a positive integer, got 0"),
     ("cua.env.max_steps=0", "verl-cua: cua.env.max_steps must be a positive integer, got 0")],
)  # fmt: skip
def test_main_refuses_a_non_positive_size_in_one_line_before_ray(override, line, tmp_path):
    cmd = [sys.executable, "-m", "verl_cua.main", "preset=cpu", override, f"hydra.run.dir={tmp_path / 'hydra'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [line], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "ray init" not in proc.stdout
