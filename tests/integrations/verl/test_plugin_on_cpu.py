"""The `verl.plugins` entry point resolves to our plug-in module, which imports cleanly and idempotently."""

import importlib
from importlib.metadata import entry_points


def test_entry_point_is_declared_and_loads():
    eps = [ep for ep in entry_points(group="verl.plugins") if ep.value.startswith("verl_cua")]
    assert [ep.name for ep in eps] == ["cua"]
    module = eps[0].load()
    assert module.__name__ == "verl_cua.integrations.verl.plugin"
    assert importlib.reload(module).register() == module.registered()
