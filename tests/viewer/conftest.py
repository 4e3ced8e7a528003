"""The viewer's tests: one headless Chromium per test module (the `chromium` fixture marks them `desktop`)."""

import shutil

import pytest


@pytest.fixture(scope="module")
def driver(chromium, tmp_path_factory):
    """Selenium on Debian's headless Chromium, 1400x1000 at scale 1."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    drv = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    yield drv
    drv.quit()
