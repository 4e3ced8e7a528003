"""Real Chromium is a test requirement (tests/run.sh installs it); without it, skip locally but fail in CI."""

import os
import shutil

import pytest


@pytest.fixture(scope="session")
def chromium():
    """Fail in CI, skip elsewhere, when Debian's chromium/chromedriver are not installed."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return True
    message = "chromium/chromedriver missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
