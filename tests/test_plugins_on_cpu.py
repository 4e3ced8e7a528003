"""Plug-in packages: every module of the `verl_cua.plugins` entry-point group is imported once per process before a
registry is first read, so a fresh interpreter knows their formats and envs (as the trainer's Ray workers do; the
e2e training run in tests/integrations/verl/test_e2e_train_on_cpu.py trains on them); a plug-in that fails to import
is one warning line and the others still load. The example plug-in is examples/plugin."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cli(path: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{ROOT}"}
    return subprocess.run([sys.executable, "-m", "verl_cua.cli", *args], capture_output=True, text=True, env=env)


def test_a_fresh_interpreter_lists_what_the_plugin_registers(plugin_site, tmp_path):
    formats, envs = _cli(plugin_site, "list", "formats"), _cli(plugin_site, "list", "envs")
    assert formats.returncode == envs.returncode == 0, formats.stderr + envs.stderr
    assert "pyautogui_one  cua_example_plugin.one_action:OneActionPyAutoGUI" in formats.stdout
    assert "miniwob-clicks  verl_cua.envs.miniwob:MiniWoBEnv" in envs.stdout
    bare = _cli(str(tmp_path / "nothing"), "list", "formats")  # negative control: not installed, not listed
    assert bare.returncode == 0 and "pyautogui_one" not in bare.stdout


def test_a_broken_plugin_is_one_warning_and_the_others_load(plugin_site):
    path = plugin_site
    broken = Path(path.split(os.pathsep)[0]) / "broken_plugin-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (broken / "entry_points.txt").write_text("[verl_cua.plugins]\nbroken = no_such_module_here\n")
    proc = _cli(path, "list", "formats")
    assert proc.returncode == 0 and "pyautogui_one" in proc.stdout
    warning = [line for line in proc.stderr.splitlines() if "broken" in line]
    assert len(warning) == 1 and "no_such_module_here" in warning[0], proc.stderr


def test_the_example_format_and_env_work_through_the_public_api(example_plugin):
    from verl_cua.actions import build_prompt, parse_action
    from verl_cua.envs import EnvUsageError
    from verl_cua.envs.task_sets import resolve_tasks
    from verl_cua.integrations.verl.config.schema import CuaConfig

    # its prompt is the one it inherits, read through its own spec
    one_prompt, base = (build_prompt(name, screen=(160, 210)) for name in ("pyautogui_one", "pyautogui"))
    assert (one_prompt.format, one_prompt.system, one_prompt.user_text("go")) == ("pyautogui_one", base.system,
                                                                                 base.user_text("go"))  # fmt: skip
    one = parse_action("```python\npyautogui.click(10, 20)\n```", format="pyautogui_one", screen=(160, 210))
    two = parse_action("```python\npyautogui.click(10, 20)\npyautogui.click(30, 40)\n```", format="pyautogui_one",
                       screen=(160, 210))  # fmt: skip
    assert one.valid and not two.valid and "one action per turn, got 2" in two.error
    cua = CuaConfig.from_mapping({"env": {"name": "miniwob-clicks"}, "action": {"format": "pyautogui_one"}})
    assert (cua.env.name, cua.action.format) == ("miniwob-clicks", "pyautogui_one")
    with pytest.raises(EnvUsageError, match="^miniwob-clicks runs click-\\* tasks only, not focus-text$"):
        resolve_tasks("miniwob-clicks", "click-test,focus-text")
