"""`verl-cua osworld-check`: how much of OSWorld's own benchmark the local desktop can run, scored honestly.

Each task file of a user's OSWorld clone (`evaluation_examples/examples/<domain>/<id>.json`) is classified:
- `internet`: a setup step or the evaluator reaches the web (a non-loopback URL, Google Drive, a login);
- `vm-only`: the task needs what no Debian host gives (Windows, an app Debian does not package, systemd as PID 1);
- `offline`: everything else. Those are run on one local desktop: reset (timed) -> evaluate before acting, which
  must be 0.0 from a real read of the desktop's state (every result getter returned a value, the metric ran) ->
  for infeasible tasks `FAIL` -> evaluate, which must be 1.0.
The report (one entry per task) and a coverage table by domain are written as JSON; task files are only read.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

KINDS = ("offline", "internet", "vm-only")
STATUSES = ("pass", "setup-failed", "no-read", "scored-without-acting", "fail-not-scored", "invalid")
_URL = re.compile(r"https?://(?!(?:localhost|127\.\d+\.\d+\.\d+|\[::1\])[:/\"'\s])", re.IGNORECASE)
_WEB_STEPS = ("googledrive", "login")
# apps Debian does not package, by the command that starts them
_UNPACKAGED = {"code": "VS Code", "vscode": "VS Code"}
_VM_ONLY = (
    (re.compile(r"\b(systemctl|journalctl|timedatectl|hostnamectl|localectl|loginctl|reboot|shutdown)\b"),
     "needs systemd as PID 1"),
    (re.compile(r"\b[A-Z]:\\[A-Za-z]"), "Windows paths"),
)  # fmt: skip
# an evaluator that reads the system's packages: only root changes them (the desktop's /usr is read-only)
_PACKAGES = re.compile(r"\bdpkg\b|\bapt(-get)? (list|install|remove)|\bsnap (list|install)")
# an instruction to (un)install software: root on /usr, and usually the web
_INSTALL = re.compile(r"\b(un)?install(ing)?\b(?!.*\b(extension|add-on|plugin)s?\b)", re.IGNORECASE)


def task_files(root: str | Path, domains: list[str] | None = None, meta: str | None = "test_all.json") -> list[Path]:
    """The task JSONs under `root` (an OSWorld `evaluation_examples` folder or its `examples/`), sorted; only those
    the `meta` file lists (`{domain: [id, ...]}`, default OSWorld's test_all.json) when it exists, None: all."""
    root = Path(root)
    examples = root / "examples" if (root / "examples").is_dir() else root
    if not examples.is_dir():
        raise FileNotFoundError(f"{root}: not an OSWorld evaluation_examples folder (no examples/<domain>/)")
    found = sorted(p for p in examples.glob("*/*.json"))
    listing = _meta_path(root, examples, meta)
    if listing is not None:
        listed = {(d, i) for d, ids in json.loads(listing.read_bytes()).items() for i in ids}
        found = [p for p in found if (p.parent.name, p.stem) in listed]
    present = sorted({p.parent.name for p in found})
    if domains:
        unknown = sorted(set(domains) - set(present))
        if unknown:
            raise ValueError(f"unknown domain(s) {', '.join(unknown)}; {examples} has: {', '.join(present)}")
        found = [p for p in found if p.parent.name in domains]
    if not found:
        raise FileNotFoundError(f"{examples}: no task files (<domain>/<id>.json)")
    return found


def _meta_path(root: Path, examples: Path, meta: str | None) -> Path | None:
    """The meta file listing the benchmark's tasks: given by path or name (next to examples/); None for all files."""
    if meta is None:
        return None
    for candidate in (Path(meta), root / meta, examples.parent / meta):
        if candidate.is_file():
            return candidate
    if meta != "test_all.json":
        raise FileNotFoundError(f"meta file {meta} not found (a path, or a name next to {examples})")
    return None


def _commands(task: dict) -> list[str]:
    """Every command and path of the task's setup steps, evaluator steps and getters."""
    evaluator = task.get("evaluator", {})
    specs = [s for key in ("result", "expected") for s in _as_list(evaluator.get(key))]
    out = []
    for step in [*task.get("config", []), *evaluator.get("postconfig", []), *specs]:
        params = step.get("parameters", step) if isinstance(step, dict) else {}
        for key in ("command", "path"):
            value = params.get(key)
            if isinstance(value, list):
                out.append(" ".join(str(v) for v in value))
            elif isinstance(value, str):
                out.append(value)
    return out


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value] if value else []


def classify(task: dict, domain: str = "") -> tuple[str, str]:
    """(kind, reason): `internet`, `vm-only` or `offline` (reason "" for offline)."""
    steps = [*task.get("config", []), *task.get("evaluator", {}).get("postconfig", [])]
    for step in steps:
        if step.get("type") in _WEB_STEPS:
            return "internet", f"setup step {step['type']}"
    if task.get("proxy"):
        return "internet", "runs behind OSWorld's web proxy"
    if _URL.search(json.dumps(task.get("config", []))):
        return "internet", "a setup step fetches or opens a web address"
    if _URL.search(json.dumps(task.get("evaluator", {}))):
        return "internet", "the evaluator reads or compares a web address"
    if _URL.search(str(task.get("instruction", ""))):
        return "internet", "the instruction names a web address"
    if domain.lower() == "windows":
        return "vm-only", "a Windows task"
    evaluator = {**task, "config": []}  # the evaluator's own commands: postconfig steps and getters
    if any(_PACKAGES.search(command) for command in _commands(evaluator)):
        return "vm-only", "checks the system's packages, which only root changes (the desktop's /usr is read-only)"
    for command in _commands(task):
        first = command.strip().split()[0] if command.strip() else ""
        if Path(first).name in _UNPACKAGED:
            return "vm-only", f"needs {_UNPACKAGED[Path(first).name]}, which Debian does not package"
        for pattern, reason in _VM_ONLY:
            if pattern.search(command):
                return "vm-only", reason
    if "vs_code" in task.get("related_apps", []) or domain == "vs_code":
        return "vm-only", "needs VS Code, which Debian does not package"
    if _INSTALL.search(str(task.get("instruction", ""))):
        return "vm-only", "installs or removes system software (root on /usr, usually the web)"
    return "offline", ""


FILE_GETTERS = ("vm_file", "cache_file")
COMMAND_GETTERS = ("vm_command_line",)


class _ReadRecorder:
    """Wraps DesktopEnv's result getters: records whether each read the desktop's state.

    A read is a value the getter returned; also `""` from a command (it ran and printed nothing), and no file where
    the task's file is the agent's to make (its path appears nowhere in the setup). None otherwise means the getter
    found nothing to read (a missing app, config file or terminal): the 0.0 it leads to says nothing of the task."""

    def __init__(self, desktop, task: dict):
        self.calls: list[str] = []
        self._setup = json.dumps(task.get("config", []))
        getters = desktop.result_getter
        if isinstance(getters, list):
            desktop.result_getter = [self._wrap(g) for g in getters]
        elif getters is not None:
            desktop.result_getter = self._wrap(getters)

    def _wrap(self, getter):
        def recorded(env, config):
            kind = config.get("type", "?") if isinstance(config, dict) else "?"
            try:
                value = getter(env, config)
            except Exception as exc:
                self.calls.append(f"{kind}: raised {type(exc).__name__}: {str(exc)[:120]}")
                raise
            path = config.get("path") if isinstance(config, dict) else None
            if value is None and kind in FILE_GETTERS and isinstance(path, str) and path not in self._setup:
                self.calls.append(f"{kind}: ok (no {path} yet: the agent's to make)")
            elif value == "" and kind in COMMAND_GETTERS:
                self.calls.append(f"{kind}: ok (no output)")
            elif value is None or value == "":
                self.calls.append(f"{kind}: returned {value!r}")
            else:
                self.calls.append(f"{kind}: ok")
            return value

        return recorded

    def real_read(self) -> bool:
        """Every result getter called returned a value."""
        return bool(self.calls) and all(": ok" in c for c in self.calls)


def check_task(env, path: Path) -> dict[str, Any]:
    """Reset -> evaluate before acting (-> FAIL -> evaluate for infeasible tasks) on `env`; one report entry."""
    from verl_cua.envs.base import InfraFailure
    from verl_cua.envs.osworld.tasks import TaskError, load_task

    entry: dict[str, Any] = {"id": path.stem, "domain": path.parent.name, "path": str(path)}
    try:
        task, _ = load_task(path)
    except TaskError as exc:
        return {**entry, "kind": "offline", "status": "invalid", "error": str(exc)}
    kind, reason = classify(task, path.parent.name)
    entry.update(kind=kind, reason=reason, infeasible=task["evaluator"]["func"] == "infeasible")
    if kind != "offline":
        return entry
    t0 = time.monotonic()
    try:
        env.reset(path)
    except TaskError as exc:
        return {**entry, "status": "invalid", "error": str(exc)}
    except InfraFailure as exc:
        return {**entry, "reset_s": round(time.monotonic() - t0, 2), "status": "setup-failed", "error": str(exc)}
    entry["reset_s"] = round(time.monotonic() - t0, 2)
    recorder = _ReadRecorder(env.desktop_env, task)
    try:
        before = env.evaluate()
    except InfraFailure as exc:
        return {**entry, "status": "setup-failed", "error": f"evaluate: {exc}"}
    entry.update(before=before, reads=recorder.calls, eval_error=env.last_eval_error)
    if before > 0:
        return {**entry, "status": "scored-without-acting"}
    if entry["infeasible"]:
        env.step("FAIL", format="pyautogui")
        entry["after_fail"] = env.evaluate()
        return {**entry, "status": "pass" if entry["after_fail"] == 1.0 else "fail-not-scored"}
    if env.last_eval_error or not recorder.real_read():
        return {**entry, "status": "no-read"}
    return {**entry, "status": "pass"}


def coverage_table(entries: list[dict]) -> list[dict]:
    """Per domain (and a total row): tasks, internet, vm-only, offline, each status, pass %, median reset."""
    rows = []
    domains = sorted({e["domain"] for e in entries})
    for domain in [*domains, "total"]:
        group = [e for e in entries if domain in ("total", e["domain"])]
        offline = [e for e in group if e.get("kind") == "offline"]
        statuses = Counter(e.get("status") for e in offline)
        resets = [e["reset_s"] for e in offline if "reset_s" in e and e.get("status") != "setup-failed"]
        row = {"domain": domain, "tasks": len(group)}
        row.update({k: sum(e.get("kind") == k for e in group) for k in KINDS})
        row.update({s: statuses.get(s, 0) for s in STATUSES})
        row["pass_pct"] = round(100 * statuses.get("pass", 0) / len(offline), 1) if offline else None
        row["reset_median_s"] = round(statistics.median(resets), 2) if resets else None
        rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    """The coverage table as fixed-width text."""
    cols = ["domain", "tasks", *KINDS, *STATUSES, "pass_pct", "reset_median_s"]
    heads = ["domain", "tasks", "offline", "internet", "vm-only", "pass", "setup-fail", "no-read", "scored-0-act",
             "FAIL-unscored", "invalid", "pass %", "reset s"]  # fmt: skip
    cells = [[("-" if r[c] is None else str(r[c])) for c in cols] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def run_check(
    root: str | Path, out: str | Path, *, domains: list[str] | None = None, tasks: list[str] | None = None,
    meta: str | None = "test_all.json", env_factory=None, progress: bool = True,
) -> dict:  # fmt: skip
    """Check every task under `root` on one local desktop; write `{tasks: [...], table: [...]}` to `out`."""
    files = task_files(root, domains, meta)
    if tasks:
        files = [p for p in files if p.stem in set(tasks)]
    if env_factory is None:
        from verl_cua.envs import make_env

        def env_factory():
            return make_env("osworld", provider="local")

    env = None
    entries = []
    try:
        for i, path in enumerate(files):
            entry = _peek(path)
            if entry is None:
                if env is None or not env.healthy():
                    if env is not None:
                        env.close()
                    env = env_factory()
                entry = check_task(env, path)
            entries.append(entry)
            if progress:
                detail = entry.get("status") or f"{entry['kind']}: {entry.get('reason', '')}"
                print(f"[{i + 1}/{len(files)}] {entry['domain']}/{entry['id']}: {detail}", flush=True)
            _write(out, entries)
    finally:
        if env is not None:
            env.close()
    return _write(out, entries)


def _peek(path: Path) -> dict | None:
    """The report entry of a task that is not run (internet / vm-only / unreadable), else None."""
    entry = {"id": path.stem, "domain": path.parent.name, "path": str(path)}
    try:
        task = json.loads(path.read_bytes())
    except ValueError as exc:
        return {**entry, "kind": "offline", "status": "invalid", "error": f"not valid JSON: {exc}"}
    if not isinstance(task, dict) or not isinstance(task.get("evaluator"), dict):
        return {**entry, "kind": "offline", "status": "invalid", "error": "not an OSWorld task (no evaluator object)"}
    kind, reason = classify(task, path.parent.name)
    if kind == "offline":
        return None
    return {**entry, "kind": kind, "reason": reason}


def _write(out: str | Path, entries: list[dict]) -> dict:
    report = {"tasks": entries, "table": coverage_table(entries)}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str))
    tmp.replace(out)
    return report
