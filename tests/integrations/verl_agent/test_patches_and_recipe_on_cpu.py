"""patches/verl-agent/ and recipes/verl_agent/: each patch documents itself and its pinned commit and touches only
its hook's files; apply.sh refuses a directory that is not verl-agent; the recipe follows verl's recipe style,
runs with stub `python3`/`docker` and hands `verl_cua.verl_agent_main` overrides whose `env.osworld`
section and estimator pass the checks main makes before Ray starts (the real-checkout run is in test_install)."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verl_cua.integrations.verl_agent.estimators import check_estimator
from verl_cua.integrations.verl_agent.settings import read_settings

ROOT = Path(__file__).resolve().parents[3]
PATCHES = ROOT / "patches/verl-agent"
RECIPE = ROOT / "recipes/verl_agent/run_qwen25vl_gigpo_osworld.sh"
BUILTIN = ["gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "grpo_passk", "gigpo"]
TOUCHES = {
    "0001-env-registry.patch": {"agent_system/environments/env_manager.py", "agent_system/environments/__init__.py"},
    "0002-adv-estimator-registry.patch": {"verl/trainer/ppo/ray_trainer.py"},
}


def test_each_patch_documents_its_hook_and_the_pinned_commit():
    pinned = (PATCHES / "UPSTREAM").read_text().split()[0]
    assert re.fullmatch(r"[0-9a-f]{40}", pinned)
    assert sorted(p.name for p in PATCHES.glob("0*.patch")) == sorted(TOUCHES)
    for name, files in TOUCHES.items():
        text = (PATCHES / name).read_text()
        head, _, diff = text.partition("\ndiff --git ")
        assert head.splitlines()[1].startswith("Subject: [PATCH") and pinned in head and len(head) > 600
        assert set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M)) == files
        assert "entry-point" in head and "registry" in head.lower()
    readme = (PATCHES / "README.md").read_text()
    assert pinned[:7] in readme and "apply.sh" in readme


def test_apply_script_refuses_what_is_not_verl_agent(tmp_path):
    proc = subprocess.run(["bash", str(PATCHES / "apply.sh"), str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "is not a verl-agent checkout" in proc.stderr
    assert subprocess.run(["bash", "-n", str(PATCHES / "apply.sh")]).returncode == 0


def run_recipe(tmp_path, *extra, **env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "argv.jsonl"
    record = tmp_path / "record.py"
    record.write_text(
        "import json, os, sys\n"
        "open(os.environ['STUB_LOG'], 'a').write(json.dumps([os.path.basename(sys.argv[1]), *sys.argv[2:]]) + '\\n')\n"
    )
    for name in ("python3", "docker"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "{record}" "$0" "$@"\n')
        (bin_dir / name).chmod(0o755)
    vm = tmp_path / "Ubuntu.qcow2"
    vm.write_text("")
    (tmp_path / "verl-agent").mkdir(exist_ok=True)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "STUB_LOG": str(log),
        "VM_PATH": str(vm),
        "VERL_AGENT_DIR": str(tmp_path / "verl-agent"),
        "DATA_DIR": str(tmp_path / "data"),
        "TASKS": "/tasks/a,/tasks/b",
        **env,
    }
    proc = subprocess.run(["bash", str(RECIPE), *extra], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    modules = [c[2] for c in calls if c[1:2] == ["-m"]]
    assert [m for m in modules if importlib.util.find_spec(m) is None] == []  # every `python -m` target exists
    main = next(c for c in calls if c[1:3] == ["-m", "verl_cua.verl_agent_main"])
    datasets = [c for c in calls if "verl_cua.integrations.verl.dataset" in c]
    return main[3:], datasets


def overrides_to_section(overrides):
    section, top = {"kwargs": {}}, {}
    for item in overrides:
        key, _, value = item.partition("=")
        if key.startswith("+env.osworld.kwargs."):
            section["kwargs"][key.split(".", 3)[3]] = value
        elif key.startswith("+env.osworld."):
            section[key.split(".", 2)[2]] = value.strip("'")
        else:
            top[key] = value
    for k in ("max_pixels",):
        section[k] = int(section[k])
    for k in ("reset_timeout", "step_timeout", "evaluate_timeout"):
        section[k] = float(section[k])
    return section, top


def test_recipe_style_and_overrides(tmp_path):
    text = RECIPE.read_text()
    assert "set -xeuo pipefail" in text and text.rstrip().endswith('"$@"')
    body = text.split("-m verl_cua.verl_agent_main \\\n", 1)[1].splitlines()
    assert all(line.startswith("    ") and line.endswith(" \\") for line in body[:-1])  # one override per line
    assert re.search(r"^TRAIN_DATA_SIZE=\$\{TRAIN_DATA_SIZE:-\d+\}", text, re.M)
    overrides, datasets = run_recipe(tmp_path, "trainer.total_epochs=3")
    assert overrides[-1] == "trainer.total_epochs=3"
    assert [d[d.index("--host") + 1] for d in datasets] == ["verl-agent", "verl-agent"]
    section, top = overrides_to_section(overrides)
    assert top["env.env_name"] == "osworld" and top["algorithm.adv_estimator"] == "gigpo"
    assert top["env.rollout.n"] == "8" and top["data.train_batch_size"] == "2"
    assert section["kwargs"] == {"provider": "docker", "path_to_vm": str(tmp_path / "Ubuntu.qcow2")}
    settings = read_settings("osworld", section)  # what main checks before Ray starts
    assert settings.tasks == "/tasks/a,/tasks/b" == settings.val_tasks and settings.format == "qwen25vl"
    check_estimator(top["algorithm.adv_estimator"], BUILTIN)


@pytest.mark.parametrize("estimator", ["cua_gigpo", "grpo", "gigpo"])
def test_recipe_estimator_swap(tmp_path, estimator):
    overrides, _ = run_recipe(tmp_path, ADV_ESTIMATOR=estimator)
    _, top = overrides_to_section(overrides)
    assert top["algorithm.adv_estimator"] == estimator
    check_estimator(estimator, BUILTIN)


def test_recipe_without_verl_agent_stops_in_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "VERL_AGENT_DIR": str(tmp_path / "nowhere"), "PROVIDER": "none"}
    proc = subprocess.run(["bash", str(RECIPE)], env={**env, "PYTHON": "true"}, capture_output=True, text=True)
    assert proc.returncode == 1 and "no verl-agent at VERL_AGENT_DIR" in proc.stderr.strip().splitlines()[-1]
