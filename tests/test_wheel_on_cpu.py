"""The wheel works without the checkout: built from the source tree, installed into a fresh venv outside the
repository, it finds its task set, the local desktop's files and its recipes inside the installed package, runs one
of our OSWorld tasks on the local desktop (0 before, 1 after its solution) and a MiniWoB++ episode in Chromium.

The fresh venv gets only the wheel (`--no-deps`); the dependencies come from this suite's venv through a path entry
(a plain path: its .pth files, such as the editable install's finder, are not run), so what is tested is the
wheel's content, not pip's resolver."""

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from verl_cua.testing.source_tree import source_copy

ROOT = Path(__file__).resolve().parents[1]
EPISODES = textwrap.dedent(
    """
    import json, sys
    import verl_cua
    from verl_cua.envs import make_env
    from verl_cua.envs.osworld.local_desktop import HOME_TEMPLATE
    from verl_cua.envs.osworld.tasks import TASK_ROOT
    from verl_cua.resources import checkout_root, recipes_dir
    from verl_cua.testing.miniwob_oracle import solution
    from verl_cua.testing.osworld_solutions import SOLUTIONS

    out = {"package": verl_cua.__file__, "tasks": str(TASK_ROOT), "home": str(HOME_TEMPLATE),
           "recipes": sorted(p.name for p in recipes_dir().glob("*.sh")), "checkout": str(checkout_root())}
    env = make_env("osworld", provider="local", action_format="pyautogui")
    try:
        env.reset("term-create-file")
        out["osworld_before"] = env.evaluate()
        out["osworld_valid"] = [env.step(s).info["action_valid"] for s in SOLUTIONS["term-create-file"]]
        out["osworld_after"] = env.evaluate()
    finally:
        env.close()
    env = make_env("miniwob", task="click-button", action_format="pyautogui")
    try:
        obs = env.reset({"task": "click-button", "seed": 3})
        out["miniwob"] = env.step(solution(env, obs)[0]).reward
    finally:
        env.close()
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    """(venv python, wheel path): the wheel built from a copy of the tree, alone in a fresh venv."""
    work = tmp_path_factory.mktemp("wheel")
    src = source_copy(ROOT, work / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(src)], check=True)
    (wheel,) = (work / "dist").glob("verl_cua-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (Path(site) / "suite_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python, wheel


def _run(python: Path, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{python.parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def test_the_wheel_holds_the_task_set_the_desktop_files_and_the_recipes(wheel_venv):
    _, wheel = wheel_venv
    names = set(zipfile.ZipFile(wheel).namelist())
    tasks = {p.relative_to(ROOT / "envs").as_posix() for p in (ROOT / "envs").rglob("*") if p.is_file()}
    missing = sorted(t for t in tasks if f"verl_cua/_envs/{t}" not in names)
    assert not missing, missing  # every file of envs/, dot-files of the desktop's HOME included
    recipes = {p.relative_to(ROOT / "recipes").as_posix() for p in (ROOT / "recipes").rglob("*") if p.is_file()}
    assert {f"verl_cua/_recipes/{r}" for r in recipes} <= names
    configs = {p.relative_to(ROOT).as_posix() for p in (ROOT / "verl_cua").rglob("*.yaml")}
    assert configs <= names and "verl_cua/py.typed" in names


def test_an_osworld_task_and_a_miniwob_episode_run_from_the_installed_wheel(
    wheel_venv, tmp_path, local_desktop, chromium
):
    python, _ = wheel_venv
    proc = _run(python, "-c", EPISODES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    installed = python.parents[1]
    for key in ("package", "tasks", "home"):
        assert Path(out[key]).is_relative_to(installed), (key, out[key])  # nothing read from the checkout
    assert out["checkout"] == "None"
    assert "quickstart.sh" in out["recipes"] and "run_qwen3vl_sdpo_osworld.sh" in out["recipes"]
    assert out["osworld_before"] == 0.0 and all(out["osworld_valid"]) and out["osworld_after"] == 1.0
    assert out["miniwob"] == 1.0


def test_the_console_script_offers_the_setup_commands(wheel_venv, tmp_path):
    python, _ = wheel_venv
    proc = _run(python.parent / "verl-cua", "--help", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "setup-desktop" in proc.stdout and "install-osworld" in proc.stdout
