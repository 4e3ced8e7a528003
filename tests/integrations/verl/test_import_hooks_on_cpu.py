"""`when_imported` runs registrations after a module's body, once, and at once for modules already loaded."""

import sys

from verl_cua.integrations.verl.import_hooks import when_imported


def test_callback_runs_after_import_with_the_module_fully_executed(tmp_path, monkeypatch):
    (tmp_path / "cua_hook_probe.py").write_text("VALUE = 41\nREGISTRY = {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    when_imported("cua_hook_probe", lambda m: (seen.append(m.VALUE), m.REGISTRY.update(gui_agent=True)))
    assert seen == []
    import cua_hook_probe

    assert seen == [41] and cua_hook_probe.REGISTRY == {"gui_agent": True}
    del sys.modules["cua_hook_probe"]
    import cua_hook_probe  # noqa: F811  (a second import does not run the callback again)

    assert seen == [41]


def test_callback_runs_at_once_for_a_loaded_module():
    seen = []
    when_imported("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]


def test_a_failing_callback_is_logged_not_raised(tmp_path, monkeypatch, caplog):
    (tmp_path / "cua_hook_probe2.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def boom(_m):
        raise RuntimeError("registration broke")

    when_imported("cua_hook_probe2", boom)
    import cua_hook_probe2

    assert cua_hook_probe2.X == 1
    assert "registration after importing cua_hook_probe2 failed" in caplog.text
