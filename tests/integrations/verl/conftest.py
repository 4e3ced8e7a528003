"""Fixtures for the verl integration tests: tiny local Qwen-VL models (both families)."""

import pytest


@pytest.fixture(scope="session", params=["qwen25vl", "qwen3vl"])
def tiny_model(request):
    """(family, path) of a tiny random Qwen-VL built locally (cached across runs)."""
    from verl_cua.testing.tiny_models import build_tiny_model

    return request.param, str(build_tiny_model(request.param))
