"""The actor's attention: flash_attention_2 (verl's default) falls back to sdpa with remove-padding off, logged,
when flash-attn cannot be imported (absent here; a broken build is simulated by a module that fails to import)."""

import logging
import sys
import types

import pytest
from hydra import compose, initialize_config_module

from verl_cua.integrations.verl.attention import FALLBACK, resolve_attention


def _config(*overrides):
    with initialize_config_module("verl_cua.integrations.verl.config", version_base=None):
        return compose("cua_trainer", overrides=["actor_rollout_ref.model.use_remove_padding=true", *overrides])


@pytest.fixture
def no_flash_attn(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)  # import fails with ImportError, as when not installed


def test_missing_flash_attn_falls_back_to_sdpa_without_remove_padding(no_flash_attn, caplog):
    cfg = _config()
    with caplog.at_level(logging.WARNING):
        message = resolve_attention(cfg)
    model = cfg.actor_rollout_ref.model
    assert model.override_config.attn_implementation == FALLBACK and model.use_remove_padding is False
    assert "flash-attn is not usable" in message and "docs/gpu.md" in message
    assert message in caplog.text and "\n" not in message


def test_a_flash_attn_build_that_fails_to_load_also_falls_back(tmp_path, monkeypatch):
    package = tmp_path / "flash_attn"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('flash_attn_2_cuda.so: undefined symbol: _ZN3c10')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "flash_attn", raising=False)
    cfg = _config("+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2")
    message = resolve_attention(cfg)
    assert "undefined symbol" in message and cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"


def test_a_usable_flash_attn_or_another_kernel_is_left_alone(monkeypatch, no_flash_attn):
    cfg = _config("+actor_rollout_ref.model.override_config.attn_implementation=eager")
    assert resolve_attention(cfg) is None and cfg.actor_rollout_ref.model.use_remove_padding is True
    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))
    cfg = _config()
    assert resolve_attention(cfg) is None
    assert cfg.actor_rollout_ref.model.use_remove_padding is True
    assert "attn_implementation" not in (cfg.actor_rollout_ref.model.get("override_config") or {})


def test_the_cpu_preset_needs_no_fallback(no_flash_attn):
    cfg = _config("preset=cpu")
    assert resolve_attention(cfg) is None and cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
