"""Names of our modules in prose resolve: every `verl_cua.x.y` and `bench.x` dotted name and every repository path
(`verl_cua/...`, `bench/...`, `tests/...`, ...) in the docs, in docstrings, comments and messages of the code, and in
the recipes names a module (and a top-level name of it) or a file that exists; a short dotted name in backticks that
starts with one of our packages (`config.schema`, `trace.filmstrip`) resolves to one of our modules; and no backticked
name carries a module prefix the floor plan retired (`cua_`, `trace_`, `compact_`) unless the code defines or uses it.
A move or rename that leaves prose behind fails here (CHANGELOG.md keeps the old names: it is history)."""

import ast
import glob
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("verl_cua", "bench")
DOTTED = re.compile(r"(?<![\w./-])((?:verl_cua|bench)(?:\.[A-Za-z_]\w*)+)")
PATH = re.compile(r"(?<![\w./-])((?:verl_cua|bench|tests|recipes|docs|envs|patches|examples)/[\w/.*-]*[\w*])")
TICKED = re.compile(r"`([a-z_][a-z0-9_]*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
RETIRED_PREFIXES = ("cua_", "trace_", "compact_")  # no module name carries them since the floor plan (CHANGELOG.md)
FILE_SUFFIXES = ("py", "json", "yaml", "sh", "md", "txt", "jsonl", "parquet", "png", "html")
# dotted names in backticks that start like one of our packages but are not modules: entry-point groups, variables
NOT_MODULES = {"verl_agent.envs", "verl_agent.adv_estimators", "envs.step", "config.out"}
ENTRY_POINT_GROUPS = {"verl_cua.plugins"}  # a full dotted name that is our entry-point group, not a module
NOT_OURS = {"examples/gigpo_trainer/run_sokoban.sh"}  # verl-agent's, named where the recipe follows it
PLACEHOLDER = re.compile(r"(^|[/._])(X|NAME|x|y|name)($|[/._])")  # `verl_cua/integrations/verl/X/`, `bench.X`


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> its file, for verl_cua and bench."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@cache
def top_level_names(module: str) -> frozenset[str]:
    """The names a module defines or imports at its top level (inside top-level `if`/`try` blocks too)."""
    names = set()
    for node in ast.parse(modules()[module].read_text()).body:
        for sub in [node] + (list(ast.walk(node)) if isinstance(node, (ast.If, ast.Try)) else []):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(sub.name)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
            elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return frozenset(names)


def resolves(dotted: str, candidates) -> bool:
    """Whether `dotted` is a module of `candidates` (name -> modules it may mean), or such a module's top-level name
    followed by attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in candidates:
            rest = parts[i:]
            dunder = bool(rest) and rest[0].startswith("__")  # `verl_cua.__file__`
            return not rest or dunder or any(rest[0] in top_level_names(m) for m in candidates[head])
    return False


@cache
def suffixes() -> dict[str, list[str]]:
    """Each trailing part of a module's dotted name (`config.schema`, `schema`) -> the modules it may mean."""
    found: dict[str, list[str]] = {}
    for module in modules():
        parts = module.split(".")
        for i in range(1, len(parts)):
            found.setdefault(".".join(parts[i:]), []).append(module)
    return found


@cache
def code_identifiers() -> frozenset[str]:
    """Every identifier the code defines or uses (names, attributes, functions, arguments, strings that are one
    identifier: row fields, metric names), the config's keys and the packaged files' names."""
    found = {m.split(".")[-1] for m in modules()}
    for path in [*ROOT.glob("verl_cua/**/*.py"), *ROOT.glob("bench/*.py"), *ROOT.glob("tests/**/*.py")]:
        code = not path.is_relative_to(ROOT / "tests")  # tests' strings hold bad names on purpose
        for node in ast.walk(ast.parse(path.read_text())):
            for field in ("id", "attr", "name", "arg", "asname"):
                value = getattr(node, field, None)
                if isinstance(value, str):
                    found.add(value)
            if code and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                found.add(node.value)
    for path in ROOT.glob("verl_cua/**/*.yaml"):
        found |= set(re.findall(r"[A-Za-z_]\w*", path.read_text())) | {path.stem}
    return frozenset(found)


def python_prose(path: Path, strings: bool = True) -> str:
    """A Python file's docstrings, comments and (with `strings`) string constants, joined; an f-string's fields
    read as `{}`."""
    source = path.read_text()
    tree = ast.parse(source)
    chunks = [line.split("#", 1)[1] for line in source.splitlines() if "#" in line]
    in_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if not strings and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            chunks.append(ast.get_docstring(node, clean=False) or "")  # (with `strings`, a docstring is one of them)
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_fstrings:
            chunks.append(node.value)
        elif strings and isinstance(node, ast.JoinedStr):
            chunks.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
    return "\n".join(chunks)


@cache
def texts() -> tuple[tuple[str, str], ...]:
    """(file, prose) of the docs, the code and the scripts; CHANGELOG.md is history and keeps old names."""
    found = []
    for path in sorted([*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md"), *ROOT.glob("patches/**/*.md")]):
        if path.name != "CHANGELOG.md":
            found.append((str(path.relative_to(ROOT)), path.read_text()))
    for folder in ("verl_cua", "bench", "tests", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            # tests: docstrings and comments only (their strings hold bad names on purpose)
            found.append((str(path.relative_to(ROOT)), python_prose(path, strings=folder != "tests")))
    for path in sorted(ROOT.glob("recipes/**/*.sh")):
        found.append((str(path.relative_to(ROOT)), path.read_text()))
    return tuple(found)


def _full_names() -> list[str]:
    full = {m: [m] for m in modules()}
    return [f"{where}: {name}" for where, text in texts() for name in DOTTED.findall(text)
            if not PLACEHOLDER.search(name) and name.rstrip(".") not in ENTRY_POINT_GROUPS
            and not resolves(name.rstrip("."), full)]  # fmt: skip


def test_every_full_module_name_resolves():
    assert _full_names() == []


def test_every_repository_path_exists():
    missing = []
    for where, text in texts():
        for match in PATH.finditer(text):
            path = match.group(1).rstrip(".,")
            if "{" in text[match.end() : match.end() + 2] or PLACEHOLDER.search(path) or path in NOT_OURS:
                continue  # a template (`recipes/run_{name}.sh`, a task id `docs/task-{e}`) or not ours
            if not glob.glob(str(ROOT / path)) and not glob.glob(f"{ROOT / path}*"):
                missing.append(f"{where}: {path}")
    assert missing == []


def test_every_short_module_name_in_backticks_resolves():
    packages = {m.split(".")[-1] for m, p in modules().items() if p.name == "__init__.py"} - set(PACKAGES)
    packages -= {"cua", "verl"}  # `cua.env.rows` is a config key; `verl.x` is verl's
    stale = [f"{where}: {name}" for where, text in texts() for name in TICKED.findall(text)
             if name.split(".")[0] in packages and name.split(".")[-1] not in FILE_SUFFIXES
             and name not in NOT_MODULES and not resolves(name, suffixes())]  # fmt: skip
    assert stale == []


def test_no_backticked_name_carries_a_retired_module_prefix():
    known = code_identifiers()
    stale = []
    for where, text in texts():
        for name in re.findall(r"`([a-z][a-z0-9_]*)(?:\.\w+)*(?:\(\))?:?`", text):
            if name.startswith(RETIRED_PREFIXES) and not name.endswith("_") and name not in known:
                stale.append(f"{where}: {name}")
    assert stale == []


def test_the_checks_catch_old_names():
    """A negative control: the names the floor plan retired, and a moved bench's, fail each check."""
    full = {m: [m] for m in modules()}
    assert not resolves("verl_cua.integrations.verl.sdpo.teacher_pass.PLAN_FIELDS", full)
    assert resolves("verl_cua.integrations.verl.rows.step_fields.FIELDS", full)
    assert not resolves("verl_cua.integrations.verl_agent.main", full) and resolves("verl_cua.verl_agent_main", full)
    assert not resolves("trace.filmstrips.render_episode", suffixes())
    assert resolves("trace.filmstrip.render_episode", suffixes()) and resolves("config.schema", suffixes())
    assert {"cua_schema", "compact_images", "trace_filmstrip"}.isdisjoint(code_identifiers())
    assert "cua_trainer" in code_identifiers() and "trace_prompt" in code_identifiers()  # today's names pass
    assert PLACEHOLDER.search("verl_cua/integrations/verl/X/") and not PLACEHOLDER.search("bench.xla")
