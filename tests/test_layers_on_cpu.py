"""The import graph of `verl_cua`, read from the source (lazy imports inside functions included): every module imports
only its own layer and the layers below it (docs/architecture.md), and no modules import each other in a circle but
the action model's one (`types` renders itself through `render`, which reads `types` and `keys`)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# lowest first; a module belongs to the layer of its longest matching prefix
LAYERS = (
    (
        "base",
        (
            "verl_cua",
            "verl_cua.registry",
            "verl_cua.resources",
            "verl_cua.metrics_log",
            "verl_cua.model_source",
            "verl_cua.exits",
        ),
    ),
    ("actions", ("verl_cua.actions",)),
    ("desktops", ("verl_cua.envs",)),
    ("algorithms", ("verl_cua.algos",)),
    ("tools below the trainer", ("verl_cua.eval", "verl_cua.viewer", "verl_cua.sft")),
    ("trainer integrations", ("verl_cua.integrations",)),
    ("tools above the trainer", ("verl_cua.doctor", "verl_cua.serve", "verl_cua.recipe_export")),
    (
        "entry points and test support",
        (
            "verl_cua.cli",
            "verl_cua.cli_help",
            "verl_cua.cli_interrupt",
            "verl_cua.listing",
            "verl_cua.main",
            "verl_cua.setup_commands",
            "verl_cua.sft_main",
            "verl_cua.verl_agent_main",
            "verl_cua.testing",
        ),
    ),
)
INTENDED_CYCLES = [{"verl_cua.actions.keys", "verl_cua.actions.render", "verl_cua.actions.types"}]


def _modules() -> dict[str, Path]:
    mods = {}
    for path in (ROOT / "verl_cua").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The module `name` lives in (an imported function's module, a package's `__init__`)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the `verl_cua` modules it imports anywhere in its source."""
    mods, graph = _modules(), {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {_owner(a.name, mods) for a in node.names if a.name.startswith("verl_cua")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(kept + ([base] if base else []))
                if base.startswith("verl_cua"):
                    found |= {
                        f"{base}.{a.name}" if f"{base}.{a.name}" in mods else _owner(base, mods) for a in node.names
                    }
        graph[name] = found - {None, name}
    return graph


def layer_of(module: str) -> int:
    """The index in LAYERS of `module`'s layer."""
    best, level = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), i
    return level


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    assert [m for m in _modules() if layer_of(m) < 0] == []


def test_no_module_imports_a_layer_above_its_own():
    graph = import_graph()
    upward = [
        f"{m} ({LAYERS[layer_of(m)][0]}) -> {d} ({LAYERS[layer_of(d)][0]})"
        for m, deps in sorted(graph.items())
        for d in sorted(deps)
        if layer_of(d) > layer_of(m)
    ]
    assert upward == []


def test_no_circle_but_the_action_models():
    assert cycles(import_graph()) == INTENDED_CYCLES


def test_the_checks_see_an_upward_arrow_and_a_circle():
    """The graph reader itself: a lazy import inside a function counts, and a two-module circle is found."""
    graph = import_graph()
    assert "verl_cua.doctor.preflight" in graph["verl_cua.main"]  # imported inside `run`
    assert layer_of("verl_cua.main") > layer_of("verl_cua.doctor.preflight") > layer_of("verl_cua.integrations.verl")
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]
