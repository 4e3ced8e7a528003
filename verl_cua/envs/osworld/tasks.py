"""OSWorld task JSON: loading (by path, dict, or name in our task set), validation, and local-path resolution.

A task names its setup steps (`config[].type` -> `SetupController._<type>_setup`), its metric(s)
(`evaluator.func`) and getters (`evaluator.result` / `expected`, `{"type": t}` -> `get_<t>`). Validation reads
the names from OSWorld's sources without importing the evaluators, and fails with one line naming the field.

Two conventions for files shipped with a task (our task set is offline): `upload_file` `local_path`s are
relative to the task JSON, and a `cache_file` getter's `path` is a file next to the task JSON, staged into the
episode's cache directory, where OSWorld's `get_cache_file` finds it.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import shutil
from pathlib import Path
from typing import Any

from verl_cua.actions import python_ast
from verl_cua.envs.base import EnvUsageError
from verl_cua.envs.osworld import evaluators
from verl_cua.resources import envs_dir

TASK_ROOT = envs_dir() / "osworld" / "tasks"
INFEASIBLE = "infeasible"


class TaskError(EnvUsageError):
    """A task JSON that OSWorld cannot run: missing field, unknown metric, getter or setup step."""


def setup_steps() -> tuple[str, ...]:
    """Setup step types OSWorld's SetupController offers (`_<type>_setup` methods), read from its source."""
    return tuple(sorted(_setup_signatures()))


@functools.cache
def _setup_signatures() -> dict[str, tuple[frozenset[str], frozenset[str], bool]]:
    """Step type -> (parameter names, required ones, takes **kwargs), from SetupController's source."""
    source = evaluators._root() / "controllers" / "setup.py"
    tree = python_ast.parse(source.read_text(encoding="utf-8", errors="replace"))
    out = {}
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "SetupController"):
            continue
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_") and node.name.endswith("_setup"):
                a = node.args
                positional = [x.arg for x in a.posonlyargs + a.args][1:]  # without self
                required = positional[: len(positional) - len(a.defaults)]
                required += [x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
                names = frozenset(positional + [x.arg for x in a.kwonlyargs])
                out[node.name[1 : -len("_setup")]] = (names, frozenset(required), a.kwarg is not None)
    return out


def task_names(root: Path = TASK_ROOT) -> list[str]:
    """Ids of the tasks in our task set (`envs/osworld/tasks/**/<id>.json`)."""
    return sorted(p.stem for p in root.rglob("*.json"))


def task_path(name: str, root: Path = TASK_ROOT) -> Path:
    """The JSON file of task `name` in our task set."""
    matches = [p for p in root.rglob("*.json") if p.stem == name]  # not a glob of `name`: "*" is no task
    if not matches:
        raise TaskError(f"unknown OSWorld task {name!r}; our task set has: {', '.join(task_names(root))}")
    return matches[0]


def load_task(task: Any, root: Path = TASK_ROOT) -> tuple[dict, Path | None]:
    """`task` as (validated config, its directory): a dict, a path to a JSON file, or a name in our set."""
    base = None
    if isinstance(task, str | Path) and (str(task).endswith(".json") or Path(task).is_file()):
        path = Path(task)
        if not path.is_file():
            raise TaskError(f"task file {path} does not exist")
        config, base = _read(path), path.parent
    elif isinstance(task, str):
        path = task_path(task, root)
        config, base = _read(path), path.parent
    elif isinstance(task, dict):
        config = copy.deepcopy(task)
    else:
        raise TaskError(f"an OSWorld task is a dict, a JSON path or a task name, got {type(task).__name__}")
    validate_task(config)
    if base is not None:
        _resolve_local_paths(config, base)
    return config, base


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    if not isinstance(data, dict):
        raise TaskError(f"{path}: a task is a JSON object")
    return data


def validate_task(task: dict) -> None:
    """Raise TaskError (one line, naming the field) unless OSWorld can run `task`."""
    tid = task.get("id") if _valid_id(task.get("id")) else "?"

    def fail(field: str, problem: str):
        raise TaskError(f"task {tid}: {field}: {problem}")

    for key in ("id", "instruction"):
        if not isinstance(task.get(key), str) or not task[key].strip():
            fail(key, "missing or not a non-empty string")
    if not _valid_id(task["id"]):  # it names the episode's cache directory
        fail("id", f"{task['id']!r} is not a file name (printable, no '/' or '\\', not '.' or '..')")
    for key in ("config",):
        _check_steps(task.get(key, []), key, fail)
    ev = task.get("evaluator")
    if not isinstance(ev, dict):
        fail("evaluator", "missing or not an object")
    _check_steps(ev.get("postconfig", []), "evaluator.postconfig", fail)
    func = ev.get("func")
    funcs = func if isinstance(func, list) else [func]
    if not funcs or not all(isinstance(f, str) for f in funcs):
        fail("evaluator.func", "missing, or not a metric name / list of metric names")
    infeasible = func == INFEASIBLE  # scored by the last action; DesktopEnv still resolves any getters it names
    metrics = evaluators.index("metrics")
    for i, f in enumerate(funcs):
        if f not in metrics and not infeasible:
            fail(f"evaluator.func{'' if func is f else f'[{i}]'}", f"{f!r} is not an OSWorld metric")
    if isinstance(func, list) and ev.get("conj", "and") not in ("and", "or"):
        fail("evaluator.conj", f"must be 'and' or 'or', got {ev['conj']!r}")
    getters = evaluators.index("getters")
    for key in ("result", "expected"):
        if key not in ev:
            if key == "result" and not infeasible:
                fail("evaluator.result", "missing")
            continue
        specs = ev[key]
        if isinstance(func, list):
            if not isinstance(specs, list) or len(specs) != len(funcs):
                fail(f"evaluator.{key}", f"must be a list of {len(funcs)} getters, one per metric")
        else:
            specs = [specs]
        for i, spec in enumerate(specs):
            where = f"evaluator.{key}" + (f"[{i}]" if isinstance(func, list) else "")
            if spec is None or spec == {}:
                # DesktopEnv skips null entries of an `expected` list, but takes len() of a lone getter
                if spec == {} and (key == "expected" or infeasible):
                    continue
                if spec is None and key == "expected" and isinstance(func, list):
                    continue
                fail(where, "missing getter" if key == "result" and not infeasible else "null; use {} for none")
            if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
                fail(f"{where}.type", "missing")
            if f"get_{spec['type']}" not in getters:
                fail(f"{where}.type", f"{spec['type']!r} is not an OSWorld getter")
            if spec["type"] == "cache_file" and not _relative_file(spec.get("path")):
                fail(f"{where}.path", "a cache_file getter needs a relative path inside the task's directory")
    options = ev.get("options", {})
    if isinstance(func, list) and "options" in ev:
        if not isinstance(options, list) or len(options) != len(funcs):
            fail("evaluator.options", f"must be a list of {len(funcs)} option objects, one per metric")
        for i, opt in enumerate(options):
            if opt is not None and not isinstance(opt, dict):
                fail(f"evaluator.options[{i}]", "must be an object (the metric's keyword arguments) or null")
    elif not isinstance(options, dict):
        fail("evaluator.options", "must be an object (the metric's keyword arguments)")


def _valid_id(tid: Any) -> bool:
    return (
        isinstance(tid, str)
        and bool(tid.strip())
        and tid.isprintable()
        and not any(c in tid for c in "/\\")
        and tid not in (".", "..")
    )


def _relative_file(path: Any) -> bool:
    return isinstance(path, str) and bool(path) and not Path(path).is_absolute() and ".." not in Path(path).parts


def _check_steps(steps: Any, field: str, fail) -> None:
    if not isinstance(steps, list):
        fail(field, "must be a list of setup steps")
    signatures = _setup_signatures()
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("type"), str):
            fail(f"{field}[{i}].type", "missing")
        if step["type"] not in signatures:
            valid = ", ".join(sorted(signatures))
            fail(f"{field}[{i}].type", f"{step['type']!r} is not an OSWorld setup step; valid: {valid}")
        params = step.get("parameters")
        if not isinstance(params, dict):  # SetupController reads cfg["parameters"] and calls the step with **it
            fail(f"{field}[{i}].parameters", "missing or not an object")
        names, required, any_name = signatures[step["type"]]
        for name in sorted(set(params) - names) if not any_name else []:
            where = f"{field}[{i}].parameters" + (f".{name}" if name.isidentifier() else f"[{name!r}]")
            fail(where, f"not a parameter of {step['type']!r}; it takes {', '.join(sorted(names)) or 'none'}")
        for name in sorted(required - set(params)):
            fail(f"{field}[{i}].parameters.{name}", f"missing (required by {step['type']!r})")


def _resolve_local_paths(task: dict, base: Path) -> None:
    steps = list(task.get("config", [])) + list(task["evaluator"].get("postconfig", []))
    for step in steps:
        if step["type"] == "upload_file":
            for f in step.get("parameters", {}).get("files", []):
                if "local_path" in f and not Path(f["local_path"]).is_absolute():
                    f["local_path"] = str((base / f["local_path"]).resolve())


def cache_files(task: dict) -> list[str]:
    """Relative paths the task's `cache_file` getters read that no step of the task writes itself (a `command` or
    `execute` step's `stdout`/`stderr` file lands in the cache directory)."""
    written = {
        step.get("parameters", {}).get(stream)
        for step in [*task.get("config", []), *task["evaluator"].get("postconfig", [])]
        for stream in ("stdout", "stderr")
    }
    out = []
    for key in ("result", "expected"):
        specs = task["evaluator"].get(key, [])
        for spec in specs if isinstance(specs, list) else [specs]:
            if isinstance(spec, dict) and spec.get("type") == "cache_file" and spec["path"] not in written:
                out.append(spec["path"])
    return out


def stage_cache(task: dict, base: Path | None, cache_dir: Path) -> None:
    """Copy the files a task's `cache_file` getters read from next to its JSON into `cache_dir/<task id>/`."""
    for rel in cache_files(task):
        if base is None:
            raise TaskError(
                f"task {task['id']}: evaluator: a cache_file getter needs the task loaded from its JSON file"
            )
        src = base / rel
        if not src.is_file():
            raise TaskError(f"task {task['id']}: evaluator: cache_file {rel!r} is not next to the task JSON")
        dst = cache_dir / task["id"] / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
