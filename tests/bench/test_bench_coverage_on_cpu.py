"""Every bench runs in CI: each module of bench/ run as `python -m bench.X` (it has a `__main__` block) has its smoke
test, tests/bench/test_X_bench_on_cpu.py, which names it; the helpers (no `__main__`) are used by a bench; and every
name a bench imports from verl_cua, bench or verl exists, also for the code a CPU cannot run (GPU checks, desktop
benches): a move that leaves a bench behind fails here, before anyone runs it for its figures."""

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
TESTS = ROOT / "tests" / "bench"
CHECKED = ("verl_cua", "bench", "verl")  # top-level packages whose names a bench imports are checked


def _is_bench(path: Path) -> bool:
    """Whether the module runs as `python -m bench.X` (an `if __name__ == "__main__":` block)."""
    return re.search(r"^if __name__ == [\"']__main__[\"']:", path.read_text(), re.M) is not None


MODULES = sorted(p for p in BENCH.glob("*.py") if p.name != "__init__.py")
BENCHES = [p.stem for p in MODULES if _is_bench(p)]
HELPERS = [p.stem for p in MODULES if not _is_bench(p)]


def _names(name: str, text: str) -> bool:
    """Whether a test's source refers to bench `name` (`bench.name`, `from bench import name`)."""
    pattern = rf"\bbench\.{name}\b|^from bench import [^\n]*\b{name}\b"
    return re.search(pattern, text, re.M) is not None


def _imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(module, name or None, line) of every import in `path` from CHECKED packages, inside functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] in CHECKED]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in CHECKED:
            found += [(node.module, a.name, node.lineno) for a in node.names]
    return found


def test_benches_and_helpers_are_what_this_test_expects():
    """A negative control for the checks below: they see the benches and the helpers."""
    assert {"memory", "gpu_smoke", "api_gui", "sdpo", "coso", "gigpo_anchors", "curve"} <= set(BENCHES)
    helpers = {"corpus", "gpu_full_size", "requires", "short_runs"}
    assert set(HELPERS) == helpers, "a new helper: is it a bench (needs a __main__)?"
    assert not _names("memory", "from bench import memory_x\nbench.memoryless") and _names("sdpo", "bench.sdpo ")


@pytest.mark.parametrize("name", BENCHES)
def test_every_bench_has_a_smoke_test_that_names_it(name):
    test = TESTS / f"test_{name}_bench_on_cpu.py"
    assert test.is_file(), f"bench.{name} has no smoke test: add {test.relative_to(ROOT)}"
    assert _names(name, test.read_text()), f"{test.name} does not run bench.{name}"


def test_every_bench_is_in_the_quickstarts_table_of_benches():
    """docs/quickstart.md lists each bench with what it measures, its extras and its rough time."""
    text = (ROOT / "docs" / "quickstart.md").read_text().split("## The benches and their extras", 1)[1]
    rows = [line for line in text.split("\n## ", 1)[0].splitlines() if line.startswith("| `bench.")]
    listed = {name for row in rows for name in re.findall(r"`bench\.(\w+)`", row.split("|")[1])}
    assert sorted(set(BENCHES) - listed) == [] and sorted(listed - set(BENCHES)) == []


@pytest.mark.parametrize("name", HELPERS)
def test_every_helper_is_used_by_a_bench(name):
    users = [b for b in BENCHES if _names(name, (BENCH / f"{b}.py").read_text())]
    assert users, f"bench/{name}.py is used by no bench: a bench (give it a __main__ and a smoke test) or dead code"


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_every_name_a_bench_imports_exists(path):
    """Imported for real (the suite's venv has every extra); a name must be the module's or one of its submodules."""
    missing = []
    for module, name, line in _imports(path):
        try:
            imported = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{path.name}:{line}: {module} ({exc})")
            continue
        if name is not None and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{path.name}:{line}: {module}.{name}")
    assert not missing, missing
