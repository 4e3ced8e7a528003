"""Suite-wide settings: hypothesis derandomised under CI=true; the `chromium` fixture for real-browser tests."""

import os
import shutil

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium/chromedriver (tests/run.sh installs them): fail in CI when missing, skip elsewhere."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return True
    message = "chromium/chromedriver missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
