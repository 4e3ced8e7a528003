"""Every task of our OSWorld task set on one real local desktop: OSWorld's metric gives 0 right after reset and 1
after the task's scripted solution (verl_cua.testing.osworld_solutions), sent as model outputs through env.step."""

import os
import shutil

import pytest

from verl_cua.envs import make_env
from verl_cua.envs.osworld.local_desktop import DESKTOP_VENV, SETUP_HINT
from verl_cua.envs.osworld.tasks import load_task, task_names
from verl_cua.testing.osworld_solutions import SOLUTIONS

TASKS = task_names()
# Office tasks whose keyboard solution CI leaves to `python -m bench.api_gui` (which runs every office task's keyboard
# and API solutions, scored by its evaluator): each one's setup and evaluator are held here by its API solution
# (test_api_tools_on_cpu.py), and the GUI ways they use (typing into a cell, the keep-format dialog, a Find & Replace
# dialog, the command search, Save As) stay covered by the office tasks below. CI's 45 minutes.
GUI_IN_BENCH = {
    "calc-bold-header", "calc-rename-sheet", "calc-sort-rows", "writer-center-title", "writer-font-name",
    "writer-page-break", "writer-type-paragraph", "impress-presenter-console",
}  # fmt: skip
APP_BINARIES = {"terminal": "xterm", "libreoffice_calc": "libreoffice", "libreoffice_writer": "libreoffice",
                "libreoffice_impress": "libreoffice", "chrome": "chromium", "vlc": "vlc", "gimp": "gimp"}  # fmt: skip


def _unavailable(message: str) -> None:
    """Skip, or fail under CI (where the desktop must be installed)."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def env():
    python = f"{DESKTOP_VENV}/bin/python"
    if shutil.which("Xvfb") is None:
        _unavailable(f"Xvfb is not installed: run {SETUP_HINT} (as root)")
    if not os.access(python, os.X_OK):
        _unavailable(f"the desktop's Python {python} is missing: run {SETUP_HINT}")
    env = make_env("osworld", provider="local", action_format="pyautogui")
    yield env
    env.close()


def test_every_task_has_a_scripted_solution():
    assert TASKS, "no tasks under envs/osworld/tasks"
    assert sorted(SOLUTIONS) == TASKS


@pytest.mark.desktop
@pytest.mark.parametrize("task", [t for t in TASKS if t not in GUI_IN_BENCH])
def test_task_scores_0_after_reset_and_1_after_its_solution(env, task, tmp_path):
    config, _ = load_task(task)
    missing = [b for app in config.get("related_apps", []) if (b := APP_BINARIES.get(app)) and not shutil.which(b)]
    if missing:
        _unavailable(f"{task} needs {', '.join(missing)}: run {SETUP_HINT} (as root)")
    obs = env.reset(task)
    assert env.evaluate() == 0.0, f"{task} scores before any action ({env.last_eval_error})"
    for step in SOLUTIONS[task]:
        result = env.step(step)
        obs = result.observation
        assert result.info["action_valid"], f"{task}: {step!r} rejected: {result.info['error']}"
        assert not result.info["infra_failure"], f"{task}: {step!r}: {result.info['error']}"
    score = env.evaluate()
    if score != 1.0:
        obs.screenshot.save(tmp_path / f"{task}.png")
    assert score == 1.0, f"{task} scored {score} ({env.last_eval_error}); last screen: {tmp_path / f'{task}.png'}"
