"""The actor's attention: flash_attention_2 (verl's default) falls back to sdpa with remove-padding off, logged,
when flash-attn 2 is not usable: absent here; a broken build, flash-attn-4's namespace-only `flash_attn` and a
full one are fake packages (with their distribution metadata) made on sys.path."""

import logging
import sys

import pytest
from hydra import compose, initialize_config_module

from verl_cua.integrations.verl.fixes.attention import FALLBACK, flash_attn_error, resolve_attention


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


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A fresh site folder first on sys.path; `flash_attn` modules imported from it are forgotten afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] == "flash_attn"}
    for name in before:
        monkeypatch.delitem(sys.modules, name)
    yield folder
    for name in [n for n in sys.modules if n.split(".")[0] == "flash_attn"]:
        del sys.modules[name]
    sys.modules.update(before)


def _dist(site, name, version, files):
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def _flash_attn_4(site):
    """What `pip install flash-attn-4` leaves: flash_attn/cute/ and no flash_attn/__init__.py."""
    (site / "flash_attn" / "cute").mkdir(parents=True)
    (site / "flash_attn" / "cute" / "__init__.py").write_text("")
    _dist(site, "flash-attn-4", "4.0.0b36", ["flash_attn/cute/__init__.py"])


def _flash_attn_2(site, metadata=True):
    """A flash-attn 2 with what verl imports (flash_attn_varlen_func, bert_padding), with or without its metadata."""
    (site / "flash_attn").mkdir(exist_ok=True)
    (site / "flash_attn" / "__init__.py").write_text(
        "__version__ = '2.8.3'\ndef flash_attn_func(*a, **k): ...\ndef flash_attn_varlen_func(*a, **k): ...\n"
    )
    (site / "flash_attn" / "bert_padding.py").write_text("index_first_axis = pad_input = unpad_input = None\n")
    if metadata:
        _dist(site, "flash_attn", "2.8.3", ["flash_attn/__init__.py", "flash_attn/bert_padding.py"])


@pytest.fixture
def cpu_torch(monkeypatch):
    """transformers' own check needs CUDA; on this CPU machine our reading of its metadata rule is what answers."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_flash_attn_4s_namespace_package_is_not_flash_attn_2(site, cpu_torch):
    _flash_attn_4(site)
    import flash_attn  # what the old check did: it imports (PEP 420), with nothing in it

    assert flash_attn.__file__ is None
    error = flash_attn_error()
    assert error == "flash_attn is a namespace package from flash-attn-4 4.0.0b36 without flash_attn_varlen_func"
    cfg = _config()
    assert error in resolve_attention(cfg) and cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    from verl_cua.doctor.system import _flash_attn

    finding = _flash_attn({"trainer": {"device": "cuda"}})  # what the doctor says transformers will use
    assert finding.level == "warn" and finding.detail.startswith(f"sdpa ({error})")


def test_flash_attn_2_beside_flash_attn_4_is_used_and_needs_its_distribution(site, cpu_torch):
    _flash_attn_4(site)
    _flash_attn_2(site, metadata=False)  # a source tree on sys.path: transformers finds no flash-attn distribution
    error = flash_attn_error()
    assert "no flash-attn distribution provides it (flash-attn-4 4.0.0b36)" in error
    assert "is_flash_attn_2_available() is False" in error
    _dist(site, "flash_attn", "2.8.3", ["flash_attn/__init__.py"])
    assert flash_attn_error() is None
    from verl_cua.doctor.system import _flash_attn

    assert _flash_attn({"trainer": {"device": "cuda"}}).detail == "flash_attention_2 (flash-attn 2.8.3)"


def test_a_flash_attn_without_verls_imports_falls_back(site, cpu_torch):
    _flash_attn_2(site)
    (site / "flash_attn" / "bert_padding.py").unlink()
    assert flash_attn_error().startswith("flash_attn.bert_padding does not import (ModuleNotFoundError")


def test_a_usable_flash_attn_or_another_kernel_is_left_alone(site, cpu_torch):
    cfg = _config("+actor_rollout_ref.model.override_config.attn_implementation=eager")
    assert resolve_attention(cfg) is None and cfg.actor_rollout_ref.model.use_remove_padding is True
    _flash_attn_2(site)
    cfg = _config()
    assert resolve_attention(cfg) is None
    assert cfg.actor_rollout_ref.model.use_remove_padding is True
    assert "attn_implementation" not in (cfg.actor_rollout_ref.model.get("override_config") or {})


def test_the_cpu_preset_needs_no_fallback(no_flash_attn):
    cfg = _config("preset=cpu")
    assert resolve_attention(cfg) is None and cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"


def test_the_doctor_names_the_users_own_attention_and_warns_only_for_flash_attention_2(no_flash_attn, monkeypatch):
    from verl_cua.doctor import system

    monkeypatch.setattr(system, "_gpu_run", lambda config: True)
    chosen = {"actor_rollout_ref": {"model": {"override_config": {"attn_implementation": "eager"}}}}
    finding = system._flash_attn(chosen)
    assert (finding.level, finding.detail) == (
        "ok",
        "eager (actor_rollout_ref.model.override_config.attn_implementation)",
    )
    finding = system._flash_attn({"actor_rollout_ref": {"model": {}}})
    assert finding.level == "warn" and finding.detail.startswith("sdpa (")
