"""The task-set check: the OSWorld tasks a recipe's `TASKS` names, resolved against this install before any VM
(`verl_cua.envs.osworld.task_check`), and the clone's commit against the one we checked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from verl_cua.doctor.finding import Finding
from verl_cua.resources import OSWORLD_CLIENT_HINT

CHECK = "osworld tasks"


def task_set_findings(tasks: str) -> list[Finding]:
    """Findings for the comma-separated OSWorld `tasks` items: FAIL when they name nothing runnable, warn when some
    are dropped (missing evaluator packages, tasks desktop-env cannot load), the clone's commit as info."""
    items = [t.strip() for t in tasks.split(",") if t.strip()]
    if not items:
        return []
    if importlib.util.find_spec("desktop_env") is None:
        missing = f"TASKS={tasks} not checked: OSWorld's client is missing ({OSWORLD_CLIENT_HINT})"
        return [Finding("warn", CHECK, missing)]
    from verl_cua.envs.base import EnvUsageError
    from verl_cua.envs.osworld.task_check import CHECKED_COMMIT, check_task_set, clone_commit

    try:
        check = check_task_set(items)
        clones = {c for c in (clone_commit(item) for item in items if Path(item).exists()) if c is not None}
    except EnvUsageError as exc:
        return [Finding("FAIL", CHECK, f"TASKS={tasks}: {exc}")]
    except (ImportError, OSError) as exc:  # a half-installed client, an unreadable file: this check's, said here
        return [Finding("FAIL", CHECK, f"TASKS={tasks} could not be checked: {type(exc).__name__}: {exc}")]
    if not check.refs:
        return [Finding("FAIL", CHECK, f"TASKS={tasks}: none of its {check.total} tasks can run: {check.summary()}")]
    findings = [Finding("warn" if check.dropped else "ok", CHECK, check.summary())]
    for folder, commit in sorted(clones):
        if commit == CHECKED_COMMIT:
            findings.append(Finding("ok", CHECK, f"{folder} is at {commit[:12]}, the commit checked for desktop-env"))
        else:
            findings.append(Finding("info", CHECK, f"{folder} is at {commit[:12]}, not {CHECKED_COMMIT[:12]} (the "
                                                   "commit checked for desktop-env); its tasks are checked one by "
                                                   "one above"))  # fmt: skip
    return findings
