"""The user's OSWorld task set checked against this install before any desktop boots.

Each task the `--tasks` items name is put in one of three piles:
- runnable: desktop-env loads it, every metric and getter it names imports, its cache files are beside it;
- unknown: desktop-env cannot load it (a metric, getter or setup step it lacks: a clone newer than the client);
- unscorable: a metric or getter it names needs a package this install lacks (python-pptx for every Impress
  metric, ...), which would otherwise turn each of its episodes into a masked failure at evaluation.

The dataset step drops the last two and prints them (`--strict` refuses instead); the preflight and the doctor
print the same check. `CHECKED_COMMIT` is the OSWorld commit whose `test_all.json` we checked against
desktop-env 1.0.2 (every task loads); `clone_commit` reads a clone's HEAD to compare.
"""

from __future__ import annotations

import collections
import functools
from dataclasses import dataclass, field
from pathlib import Path

from verl_cua.envs.base import EnvUsageError
from verl_cua.envs.osworld import evaluators
from verl_cua.envs.osworld.tasks import TaskError, cache_files, load_task
from verl_cua.envs.task_sets import TaskRef
from verl_cua.resources import OSWORLD_EVALUATORS_HINT

# xlang-ai/OSWorld, 2024-10-22 ("Merge pull request #78 from xlang-ai/docker"): its evaluation_examples/test_all.json
# (369 tasks, 10 domains) loads whole with desktop-env 1.0.2; 78 of them need the osworld-evaluators extra
CHECKED_COMMIT = "f0ae387b39069785fdf67a1920e13172a733c384"
CHECKED_TASKS = "evaluation_examples/test_all.json"
CLONE_HINT = (
    f"git clone https://github.com/xlang-ai/OSWorld && git -C OSWorld checkout {CHECKED_COMMIT[:12]} "
    f"(the commit checked against desktop-env 1.0.2)"
)


@dataclass(frozen=True)
class DroppedTask:
    """A task the check keeps out of the run: its file, id (or "?"), why, and the packages it needs."""

    file: str
    task_id: str
    reason: str  # "unknown" | "unscorable"
    detail: str
    packages: tuple[str, ...] = ()


@dataclass
class TaskSetCheck:
    """The runnable tasks, in order, and the dropped ones with their reasons."""

    refs: list[TaskRef] = field(default_factory=list)
    dropped: list[DroppedTask] = field(default_factory=list)

    @property
    def total(self) -> int:
        """How many tasks the items name."""
        return len(self.refs) + len(self.dropped)

    def by_package(self) -> dict[str, list[DroppedTask]]:
        """Unscorable tasks under each missing package (a task needing two is under both)."""
        out: dict[str, list[DroppedTask]] = collections.defaultdict(list)
        for task in self.dropped:
            for package in task.packages:
                out[package].append(task)
        return dict(sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0])))

    def summary(self) -> str:
        """One line: how many tasks run, how many are dropped and why, and the install command if packages lack."""
        unknown = sum(t.reason == "unknown" for t in self.dropped)
        unscorable = len(self.dropped) - unknown
        line = f"{len(self.refs)} of {self.total} OSWorld tasks runnable"
        if unscorable:
            needs = ", ".join(f"{pkg} ({len(tasks)})" for pkg, tasks in self.by_package().items())
            line += f"; {unscorable} need packages this install lacks: {needs}: {OSWORLD_EVALUATORS_HINT}"
        if unknown:
            line += f"; {unknown} desktop-env {_client_version()} cannot load"
        return line

    def lines(self) -> list[str]:
        """The summary, then one line per missing package (its tasks) and per task desktop-env cannot load."""
        out = [self.summary()]
        for package, tasks in self.by_package().items():
            out.append(f"  needs {package}: {', '.join(_name(t) for t in tasks)}")
        out += [f"  cannot load {t.file}: {t.detail}" for t in self.dropped if t.reason == "unknown"]
        return out


def check_task_set(items: list[str]) -> TaskSetCheck:
    """Sort the tasks `items` name (task JSON files, folders, meta files or names in our set) into runnable and
    dropped ones; an item that names nothing (a missing clone) raises EnvUsageError naming the clone command."""
    from verl_cua.envs.osworld.task_refs import task_files

    evaluators.install()
    check = TaskSetCheck()
    seen: set[str] = set()
    for item in items:
        try:
            files = task_files(item)
        except EnvUsageError as exc:
            hint = f"; for OSWorld's own tasks: {CLONE_HINT}" if not Path(item).exists() else ""
            raise EnvUsageError(f"{exc}{hint}") from None
        for f in files:
            key = str(f.resolve())
            if key in seen:
                continue
            seen.add(key)
            verdict = judge_task(f)
            if isinstance(verdict, DroppedTask):
                check.dropped.append(verdict)
            else:
                check.refs.append(verdict)
    return check


def judge_task(path: Path) -> TaskRef | DroppedTask:
    """`path`'s task as a runnable TaskRef, or why it is dropped."""
    try:
        config, base = load_task(str(path))
    except TaskError as exc:
        return DroppedTask(str(path), "?", "unknown", str(exc))
    tid = config["id"]
    for rel in cache_files(config):
        if base is None or not (base / rel).is_file():
            detail = f"task {tid}: evaluator: cache_file {rel!r} is not next to the task JSON"
            return DroppedTask(str(path), tid, "unknown", detail)
    packages = task_packages(config)
    if packages:
        detail = f"task {tid}: needs {', '.join(packages)}"
        return DroppedTask(str(path), tid, "unscorable", detail, packages)
    resolved = path.resolve()
    return TaskRef("osworld", str(resolved), resolved.parent.name, tid)


def task_packages(task: dict) -> tuple[str, ...]:
    """The pip names of the packages `task`'s metrics and getters need that are not installed (sorted)."""
    from verl_cua.envs.osworld.check import used_evaluators

    needed = set()
    for name, kind in used_evaluators(task):
        package = _missing(name, kind)
        if package:
            needed.add(package)
    return tuple(sorted(needed))


@functools.cache
def _missing(name: str, kind: str) -> str | None:
    resolved = evaluators.metric(name) if kind == "metric" else evaluators.getter(name)
    return evaluators.missing_package(resolved)


def clone_commit(path: str | Path) -> tuple[Path, str] | None:
    """The OSWorld clone holding `path` and its HEAD commit, read from `.git` (no git needed); None outside a
    clone. Only folders up to the one holding `evaluation_examples` count: a copy of OSWorld that is not a clone,
    inside some other repository (a verl-cua checkout), is not that repository's commit."""
    here = Path(path).resolve()
    chain = [here, *here.parents]
    top = next((i for i, folder in enumerate(chain) if folder.name == "evaluation_examples"), None)
    for folder in chain if top is None else chain[: top + 2]:
        git = folder / ".git"
        if git.is_file():  # a worktree: "gitdir: <path>"
            git = (folder / git.read_text().partition(":")[2].strip()).resolve()
        if not git.is_dir():
            continue
        common = git / "commondir"  # a worktree's refs live in the main repository's folder
        shared = (git / common.read_text().strip()).resolve() if common.is_file() else git
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return folder, head
        ref = head[5:]
        loose = next((g / ref for g in (git, shared) if (g / ref).is_file()), None)
        if loose is not None:
            return folder, loose.read_text().strip()
        packed = shared / "packed-refs"
        for line in packed.read_text().splitlines() if packed.is_file() else []:
            sha, _, name = line.partition(" ")
            if name == ref:
                return folder, sha
        return folder, "unknown"
    return None


def _name(task: DroppedTask) -> str:
    return f"{Path(task.file).parent.name}/{task.task_id}"


def _client_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("desktop-env")
    except importlib.metadata.PackageNotFoundError:
        return "?"
