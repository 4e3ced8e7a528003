"""The doctor's api_gui check: the app APIs need LibreOffice's Python bridge (`uno`) in the local desktop's Python."""

import os
import sys

from verl_cua.doctor import system
from verl_cua.envs.osworld import local_desktop


def test_a_desktop_python_without_uno_fails_the_api_gui_check_with_the_install_command(tmp_path, monkeypatch):
    venv = tmp_path / "desktop-venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, venv / "bin" / "python")  # this test's interpreter: no `uno` module
    monkeypatch.setattr(local_desktop, "DESKTOP_VENV", str(venv))
    why = local_desktop.missing_uno_bridge()
    assert why is not None and "apt-get install -y python3-uno" in why and "\n" not in why
    monkeypatch.setattr(local_desktop, "check_system", lambda: None)  # the rest of the desktop: not under test here
    (finding,) = system._local_desktop(api_gui=True)
    assert (finding.level, finding.check) == ("FAIL", "app APIs") and "python3-uno" in finding.detail
    assert all(f.check != "app APIs" for f in system._local_desktop(api_gui=False))  # GUI formats do not need it
    monkeypatch.setattr(local_desktop, "DESKTOP_VENV", str(tmp_path / "none"))
    assert "does not run" in local_desktop.missing_uno_bridge()
