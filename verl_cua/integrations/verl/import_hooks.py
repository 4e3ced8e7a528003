"""Run a callback right after a module is imported: lets the plug-in register into heavy verl modules
(the agent-loop registry, the engine registry) without importing them on every `import verl`."""

from __future__ import annotations

import importlib.abc
import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType

logger = logging.getLogger(__name__)

Callback = Callable[[ModuleType], None]
_CALLBACKS: dict[str, list[Callback]] = {}
_LOCK = threading.RLock()


def when_imported(module_name: str, callback: Callback) -> None:
    """Call `callback(module)` once `module_name` has been imported (now, if it already is)."""
    with _LOCK:
        module = sys.modules.get(module_name)
        if module is None or getattr(module, "__spec__", None) is None or _initializing(module):
            _CALLBACKS.setdefault(module_name, []).append(callback)
            _install()
            return
    _run(module_name, module, [callback])


def _initializing(module: ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _run(name: str, module: ModuleType, callbacks: list[Callback]) -> None:
    for callback in callbacks:
        try:
            callback(module)
        except Exception:  # a broken registration must be loud: verl would swallow it
            logger.exception("verl-cua: registration after importing %s failed", name)


class _LoaderWithHooks(importlib.abc.Loader):
    """Wraps a module's loader; runs the registered callbacks after the module body has executed."""

    def __init__(self, loader: importlib.abc.Loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _LOCK:
            callbacks = _CALLBACKS.pop(self._name, [])
        _run(self._name, module, callbacks)

    def __getattr__(self, item):
        return getattr(self._loader, item)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """A meta-path finder that finds nothing itself; it wraps the loader of the modules we wait for."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _CALLBACKS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _LoaderWithHooks(spec.loader, fullname)
                return spec
        return None


_FINDER = _PostImportFinder()


def _install() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
