"""The user's OSWorld task set checked against this install before any VM (the dataset step, the preflight, the
doctor): a task whose metric needs a package this install lacks is dropped (or, `--strict`, refused) in one named
line with the install command; a task desktop-env cannot load is skipped and listed; TASKS that name nothing say
how to get OSWorld's tasks; a clone's commit is read from its .git. The task files are written here (OSWorld's own
are not ours to ship); desktop-env's real metric sources decide."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("desktop_env")

from verl_cua.envs.osworld.task_check import CHECKED_COMMIT, check_task_set, clone_commit  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EXPECTED_RULE = {"type": "rule", "rules": {"expected": "ok"}}
# python-pptx hidden from the child whatever this machine has: the stub path runs as on an install without it
NO_PPTX = textwrap.dedent("""
    import importlib.machinery, sys
    found = importlib.machinery.PathFinder.find_spec
    def find_spec(cls, name, path=None, target=None):
        return None if name.split(".")[0] == "pptx" else found(name, path, target)
    importlib.machinery.PathFinder.find_spec = classmethod(find_spec)
    from verl_cua.integrations.verl.dataset import main
    sys.exit(main(sys.argv[1:]))
""")


def _task(folder: Path, domain: str, tid: str, func: str, result: dict, expected: dict | None = None) -> Path:
    path = folder / domain / f"{tid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    evaluator = {"func": func, "result": result, **({"expected": expected} if expected else {})}
    path.write_text(json.dumps({"id": tid, "instruction": "Do it.", "config": [], "evaluator": evaluator}))
    return path


@pytest.fixture
def task_set(tmp_path) -> Path:
    """An upstream-shaped folder: a calc task (openpyxl, in the osworld extra), an Impress task (python-pptx), one
    naming a metric desktop-env 1.0.2 lacks, and one whose cache file is not beside it."""
    root = tmp_path / "examples"
    vm_file = {"type": "vm_file", "path": "/home/user/a.xlsx", "dest": "a.xlsx"}
    _task(root, "libreoffice_calc", "calc-1", "compare_table", vm_file, {**vm_file, "path": "/home/user/b.xlsx"})
    pptx = {"type": "vm_file", "path": "/home/user/a.pptx", "dest": "a.pptx"}
    _task(root, "libreoffice_impress", "impress-1", "compare_pptx_files", pptx, {**pptx, "dest": "b.pptx"})
    _task(root, "os", "newer-1", "metric_from_a_newer_osworld", {"type": "vm_command_line", "command": "true"})
    _task(root, "os", "stage-1", "exact_match", {"type": "cache_file", "path": "missing.txt"}, EXPECTED_RULE)
    return root


def _dataset(*args: str, hide_pptx: bool = True, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    code = NO_PPTX if hide_pptx else "import sys; from verl_cua.integrations.verl.dataset import main; " \
                                     "sys.exit(main(sys.argv[1:]))"  # fmt: skip
    cmd = [sys.executable, "-c", code, "--env", "osworld", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_an_impress_task_without_python_pptx_is_dropped_in_one_named_line_before_any_vm(task_set, tmp_path):
    out = tmp_path / "train.parquet"
    proc = _dataset("--tasks", str(task_set), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("verl-cua dataset: 1 of 4 OSWorld tasks runnable; 1 need packages this install lacks: ")
    assert "python-pptx (1)" in lines[0] and "verl-cua install-osworld --evaluators" in lines[0]
    (needs,) = [line for line in lines if "needs python-pptx" in line]
    assert needs.endswith("libreoffice_impress/impress-1")
    rows = pd.read_parquet(out)
    assert list(rows["extra_info"].map(lambda e: e["task_id"])) == ["calc-1"]  # the control: openpyxl is installed


def test_unknown_metrics_and_unstageable_tasks_are_skipped_and_listed_and_strict_refuses(task_set, tmp_path):
    proc = _dataset("--tasks", str(task_set), "--out", str(tmp_path / "a.parquet"))
    listed = [line for line in proc.stderr.splitlines() if "dataset:   cannot load " in line]
    assert len(listed) == 2 and "1 of 4" in proc.stderr.splitlines()[0]
    assert any("'metric_from_a_newer_osworld' is not an OSWorld metric" in line for line in listed)
    assert any("cache_file 'missing.txt' is not next to the task JSON" in line for line in listed)
    strict = _dataset("--tasks", str(task_set), "--out", str(tmp_path / "b.parquet"), "--strict")
    assert strict.returncode == 2 and "(--strict: refused)" in strict.stderr.splitlines()[0]
    assert not (tmp_path / "b.parquet").exists()
    calc = str(task_set / "libreoffice_calc")
    assert _dataset("--tasks", calc, "--out", str(tmp_path / "c.parquet"), "--strict").returncode == 0


def test_tasks_that_name_nothing_say_how_to_get_osworlds_tasks(tmp_path):
    out = str(tmp_path / "x.parquet")  # from a folder with no OSWorld clone in it (the docs put one in a checkout)
    proc = _dataset("--tasks", "OSWorld/evaluation_examples/test_all.json", "--out", out, cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "no OSWorld task file or folder OSWorld/evaluation_examples/test_all.json" in proc.stderr
    assert f"checkout {CHECKED_COMMIT[:12]}" in proc.stderr


def test_the_check_counts_by_package_and_reads_meta_files(task_set):
    (task_set.parent / "test_all.json").write_text(json.dumps({"libreoffice_calc": ["calc-1"], "os": ["newer-1"]}))
    check = check_task_set([str(task_set.parent / "test_all.json")])
    assert [r.task_id for r in check.refs] == ["calc-1"] and [d.task_id for d in check.dropped] == ["?"]
    assert check.summary().startswith("1 of 2 OSWorld tasks runnable; 1 desktop-env ")


def test_a_clones_commit_is_read_from_its_git_folder(tmp_path):
    clone = tmp_path / "OSWorld"
    (clone / ".git" / "refs" / "heads").mkdir(parents=True)
    (clone / "evaluation_examples").mkdir()
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert clone_commit(clone / "evaluation_examples") == (clone, "unknown")
    (clone / ".git" / "packed-refs").write_text(f"# pack-refs\n{CHECKED_COMMIT} refs/heads/main\n")
    assert clone_commit(clone / "evaluation_examples") == (clone, CHECKED_COMMIT)
    (clone / ".git" / "refs" / "heads" / "main").write_text("a" * 40 + "\n")  # a loose ref wins
    assert clone_commit(clone) == (clone, "a" * 40)
    (clone / ".git" / "HEAD").write_text("b" * 40 + "\n")  # detached
    assert clone_commit(clone) == (clone, "b" * 40)
    assert clone_commit(tmp_path / "elsewhere") is None or clone_commit(tmp_path / "elsewhere")[0] != clone


def test_a_copy_inside_another_repository_is_not_that_repositorys_commit_and_worktrees_read_their_common_refs(
    tmp_path,
):
    outer = tmp_path / "verl-cua"
    (outer / ".git").mkdir(parents=True)
    (outer / ".git" / "HEAD").write_text("c" * 40 + "\n")
    copy = outer / "OSWorld" / "evaluation_examples" / "examples"  # downloaded, not cloned
    copy.mkdir(parents=True)
    assert clone_commit(copy) is None and clone_commit(outer) == (outer, "c" * 40)  # the negative control
    main_git, tree = tmp_path / "main.git", tmp_path / "OSWorld-wt"
    (main_git / "worktrees" / "wt").mkdir(parents=True)
    (main_git / "packed-refs").write_text(f"{CHECKED_COMMIT} refs/heads/osworld\n")
    (main_git / "worktrees" / "wt" / "HEAD").write_text("ref: refs/heads/osworld\n")
    (main_git / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (tree / "evaluation_examples").mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {main_git / 'worktrees' / 'wt'}\n")
    assert clone_commit(tree / "evaluation_examples") == (tree, CHECKED_COMMIT)


def test_the_doctor_prints_the_task_set_the_first_step_and_the_checkpoint(task_set, monkeypatch):
    """`verl-cua doctor` on the flagship: the task-set check on its TASKS, the first step's learning rate (above 0
    in the flagship's composed config, 0 with verl's constant schedule: the negative control), the checkpoint line."""
    env = {"TASKS": str(task_set), "WANDB_MODE": "offline"}
    cmd = [sys.executable, "-m", "verl_cua.cli", "doctor", "recipes/run_qwen3vl_sdpo_osworld.sh"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env={**_environ(), **env})
    lines = proc.stdout.splitlines()
    (tasks,) = [line for line in lines if line.startswith("warn  osworld tasks: 1 of 4 OSWorld tasks runnable")]
    (first,) = [line for line in lines if " first step: " in line]
    assert first.startswith("ok    first step: lr 1e-06 at step 1")
    (ckpt,) = [line for line in lines if " checkpoint: " in line]
    assert "the first save after step 20: ~128 GB at " in ckpt and "SHAKEDOWN=1" in ckpt
    constant = [*cmd, "actor_rollout_ref.actor.optim.lr_scheduler_type=constant"]
    proc = subprocess.run(constant, capture_output=True, text=True, timeout=300, cwd=ROOT, env={**_environ(), **env})
    (first,) = [line for line in proc.stdout.splitlines() if " first step: " in line]
    assert first.startswith("warn  first step: lr 0 at step 1")


def _environ() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("WANDB", "TASKS"))}
