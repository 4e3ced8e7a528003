"""Fixtures for the verl integration tests: tiny local Qwen-VL models (both families)."""

import pytest


@pytest.fixture(scope="session", params=["qwen25vl", "qwen3vl"])
def tiny_model(request):
    """(family, path) of a tiny random Qwen-VL built locally (cached across runs)."""
    from verl_cua.testing.tiny_models import build_tiny_model

    return request.param, str(build_tiny_model(request.param))


@pytest.fixture(scope="session")
def sft_model(tmp_path_factory, chromium):
    """(base model, SFT-tuned model, work dir) of the ladder's first rung on the CPU: the oracle's eval runs on
    training layouts -> `verl-cua sft-data` -> verl's SFT trainer (verl_cua.testing.sft_ladder.climb), built here
    every session (not the cached copy: this is the pipeline under test)."""
    from verl_cua.testing.sft_ladder import base_model, climb, final_model

    work = tmp_path_factory.mktemp("sft_ladder")
    base = base_model()
    climb(work, base)
    return base, final_model(work / "ckpt"), work
