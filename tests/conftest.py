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


@pytest.fixture(scope="session")
def local_desktop():
    """The local OSWorld desktop's system side (envs/local_desktop/setup.sh): fail in CI when missing, else skip."""
    from verl_cua.envs.osworld.local_desktop import DesktopStartError, check_system

    try:
        check_system()
        import desktop_env  # noqa: F401
    except (DesktopStartError, ImportError) as exc:
        message = f"local desktop unavailable ({exc}); run envs/local_desktop/setup.sh and envs/osworld/install.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return True
