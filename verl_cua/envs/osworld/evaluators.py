"""Lazy access to OSWorld's metrics and getters (`desktop_env.evaluators`), one submodule at a time.

Upstream's `metrics/__init__` imports every metric module, and with them easyocr (torch), librosa, OpenCV,
scikit-image, PyMuPDF and more. We replace the two package modules in `sys.modules` by lazy ones that find a
name's submodule by reading the sources (no import) and import only that one. A heavy package the submodule
imports but that is not installed becomes a stub: the module still loads, and the metric that really uses the
package fails, when called, with one line naming the package to install.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import threading
import types
from pathlib import Path

from verl_cua.actions import python_ast
from verl_cua.envs.base import TaskUnscorable
from verl_cua.resources import OSWORLD_CLIENT_HINT, OSWORLD_EVALUATORS_HINT

PACKAGES = ("metrics", "getters")
INSTALL_HINT = OSWORLD_CLIENT_HINT
# import name -> pip name, for the one-line errors
PIP_NAMES = {
    "fitz": "pymupdf",
    "skimage": "scikit-image",
    "cv2": "opencv-python-headless",
    "docx": "python-docx",
    "odf": "odfpy",
    "acoustid": "pyacoustid",
    "bs4": "beautifulsoup4",
    "yaml": "PyYAML",
    "pptx": "python-pptx",
    "imagehash": "ImageHash",
    "PyPDF2": "PyPDF2",
    "easyocr": "easyocr",
    "librosa": "librosa",
    "borb": "borb",
    "formulas": "formulas",
    "fastdtw": "fastdtw",
    "mutagen": "mutagen",
    "scipy": "scipy",
    "pydrive": "pydrive",
    "playwright": "playwright",
}
_lock = threading.RLock()


class MissingDependency(ImportError, TaskUnscorable):
    """An OSWorld metric or getter needs a package that is not installed (the episode is masked, its desktop kept)."""


class EvaluatorError(LookupError):
    """A task names a metric or getter that OSWorld does not have."""


def _stub_module(name: str) -> types.ModuleType:
    """A module standing in for a missing package: any use raises MissingDependency naming it."""
    top = name.split(".")[0]
    pip = PIP_NAMES.get(top, top)
    message = f"this OSWorld evaluator needs the package {pip}: pip install {pip} (or {OSWORLD_EVALUATORS_HINT})"

    class _Meta(type):
        def __getattr__(cls, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            raise MissingDependency(message)

    def _new(cls, *args, **kwargs):
        raise MissingDependency(message)

    module = types.ModuleType(name)
    module.__path__ = []  # a package, so `from stub.sub import x` works
    module.__verl_cua_stub__ = message
    module.__verl_cua_pip__ = pip

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        namespace = {"__new__": _new, "__module__": name, "__verl_cua_stub__": message, "__verl_cua_pip__": pip}
        return _Meta(attr, (), namespace)

    module.__getattr__ = __getattr__
    return module


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Active only while an evaluator submodule imports: missing packages load as stubs."""

    def find_spec(self, fullname, path, target=None):
        if not _imported_by_desktop_env():
            return None  # a third-party package's own optional import (pandas -> pyarrow): leave it alone
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            try:
                if finder.find_spec(fullname, path, target) is not None:
                    return None
            except (ImportError, ValueError):
                continue
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return _stub_module(spec.name)

    def exec_module(self, module):
        pass


def _imported_by_desktop_env() -> bool:
    """Whether the import statement being resolved sits in one of desktop_env's own modules."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(("importlib", "_frozen_importlib")) and name != __name__:
            return name.startswith("desktop_env.")
        frame = frame.f_back
    return False


@functools.cache
def _root() -> Path:
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the osworld env needs OSWorld's desktop-env client: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def index(package: str) -> dict[str, str]:
    """Public function name -> submodule, for `metrics` or `getters`, read from the sources without importing.

    The package's `__init__` decides, as upstream's eager import does: the names its `from .sub import ...`
    statements export (the last import of a name wins); without such statements, every public function."""
    init = python_ast.parse(
        (_root() / "evaluators" / package / "__init__.py").read_text(encoding="utf-8", errors="replace")
    )
    exported = {
        alias.asname or alias.name: node.module
        for node in init.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }
    if exported:
        return exported
    names: dict[str, str] = {}
    for path in sorted((_root() / "evaluators" / package).glob("*.py")):
        if path.stem == "__init__":
            continue
        tree = python_ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                names.setdefault(node.name, path.stem)
    return names


def _load(package: str, attr: str, *, raw: bool = False):
    """`package`'s function `attr`; a metric comes bounded (`metric_child`: a child process with limits) unless
    `raw`."""
    if package == "getters":
        from verl_cua.envs.osworld.getter_fixes import GETTER_FIXES

        if attr in GETTER_FIXES:
            return GETTER_FIXES[attr]
    submodule = index(package).get(attr)
    if submodule is None:
        raise AttributeError(attr)
    name = f"desktop_env.evaluators.{package}.{submodule}"
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            finder = _StubFinder()
            sys.meta_path.append(finder)
            try:
                module = importlib.import_module(name)
            finally:
                sys.meta_path.remove(finder)
                _drop_stubs()
    fn = getattr(module, attr)
    message = missing_dependency(fn)
    if message is not None:
        return _refusing(fn, message, missing_package(fn))
    if package == "metrics" and not raw and callable(fn):
        from verl_cua.envs.osworld.metric_child import bounded

        return bounded(attr, fn)
    return fn


def raw_metric(name: str):
    """The metric `name` itself, run in this process (what the bounded child calls)."""
    if name not in index("metrics"):
        raise EvaluatorError(f"OSWorld has no metric {name!r}")
    return _load("metrics", name, raw=True)


def _drop_stubs() -> None:
    """Take the stubs out of `sys.modules` (the evaluator modules keep theirs): any other code's `import cv2`
    must still fail as usual, not get a stub (a `try: import cv2 except ImportError` fallback would break)."""
    for mod_name, mod in list(sys.modules.items()):
        if isinstance(mod, types.ModuleType) and "__verl_cua_stub__" in vars(mod):
            sys.modules.pop(mod_name, None)


def _refusing(fn, message: str, package: str | None):
    """`fn` that raises MissingDependency before running: upstream metrics wrap their work in `except
    Exception` (compare_image_text scores 0, compare_audios scores 1.0 with librosa missing), which would
    otherwise swallow the stub's error and return a score."""

    @functools.wraps(fn)
    def refuse(*args, **kwargs):
        raise MissingDependency(message)

    refuse.__verl_cua_missing__ = message
    refuse.__verl_cua_pip__ = package
    return refuse


def infeasible():
    """OSWorld's placeholder metric for infeasible tasks (upstream's `metrics.infeasible`; DesktopEnv scores
    such tasks by the last action, but looks the name up at reset)."""


def _lazy_package(package: str) -> types.ModuleType:
    full = f"desktop_env.evaluators.{package}"
    module = types.ModuleType(full, f"OSWorld {package}, imported one submodule at a time by verl-cua")
    module.__path__ = [str(_root() / "evaluators" / package)]
    module.__package__ = full
    module.__getattr__ = functools.partial(_load, package)
    if package == "metrics":
        module.infeasible = infeasible
    return module


def _quiet_proxy_pool(record: logging.LogRecord) -> bool:
    """Drop the AWS proxy pool's import-time error about its missing config file (we use no proxies)."""
    return "Failed to load proxies" not in record.getMessage()


def install() -> None:
    """Put the lazy `desktop_env.evaluators.metrics` / `.getters` in place (idempotent, before DesktopEnv loads) and
    pin Playwright's CDP connections to the desktop (`cdp_pin`)."""
    from verl_cua.envs.osworld import cdp_pin

    cdp_pin.install()
    proxy_logger = logging.getLogger("desktopenv.providers.aws.ProxyPool")
    if _quiet_proxy_pool not in proxy_logger.filters:
        proxy_logger.addFilter(_quiet_proxy_pool)
    with _lock:
        evaluators = sys.modules.get("desktop_env.evaluators")
        if evaluators is None:
            evaluators = importlib.import_module("desktop_env.evaluators")
        for package in PACKAGES:
            full = f"desktop_env.evaluators.{package}"
            current = sys.modules.get(full)
            if current is not None and getattr(current, "__getattr__", None) is not None:
                continue
            if current is not None:  # the eager upstream package is already loaded: keep it
                continue
            lazy = _lazy_package(package)
            sys.modules[full] = lazy
            setattr(evaluators, package, lazy)


def metric(name: str):
    """The OSWorld metric function `name`; unknown names raise EvaluatorError."""
    return _resolve("metrics", name)


def getter(kind: str):
    """The OSWorld getter for a `{"type": kind}` config (function `get_<kind>`)."""
    return _resolve("getters", f"get_{kind}")


def _resolve(package: str, name: str):
    if name not in index(package):
        raise EvaluatorError(f"OSWorld has no {package[:-1]} {name!r}")
    install()
    return getattr(sys.modules[f"desktop_env.evaluators.{package}"], name)


def missing_dependency(fn) -> str | None:
    """The one-line install message if `fn`, or an OSWorld helper it calls, uses a package that was stubbed."""
    return _stub_attr(fn, "__verl_cua_missing__", "__verl_cua_stub__")


def missing_package(fn) -> str | None:
    """The pip name of the first package `fn` (or an OSWorld helper it calls) needs that is not installed."""
    return _stub_attr(fn, "__verl_cua_pip__", "__verl_cua_pip__")


def _stub_attr(fn, own: str, stub: str) -> str | None:
    value = getattr(fn, own, None)
    if value:
        return value
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return _stub_used(code, getattr(fn, "__globals__", {}), set(), stub)


def _stub_used(code: types.CodeType, namespace: dict, seen: set, attr: str) -> str | None:
    """`attr` of the first stubbed module/class `code` names (following desktop_env functions)."""
    if code in seen:
        return None
    seen.add(code)
    for value_name in code.co_names:
        value = namespace.get(value_name)
        if value is None:
            continue
        found = getattr(value, attr, None) if isinstance(value, type | types.ModuleType) else None
        if found:
            return found
        inner = getattr(value, "__code__", None)
        if isinstance(value, types.FunctionType) and (value.__module__ or "").startswith("desktop_env."):
            found = _stub_used(inner, value.__globals__, seen, attr)
            if found:
                return found
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found = _stub_used(const, namespace, seen, attr)
            if found:
                return found
    return None
