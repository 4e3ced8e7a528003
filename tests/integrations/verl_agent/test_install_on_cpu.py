"""`install()` routes our env names and estimators and hands everything else to verl-agent's own code.

CI has no verl-agent, so the first tests run against a fake stand-in of its three hook points (`make_envs`,
`compute_advantage`, the trainer's critic check), unpatched and patched. With `VERL_AGENT_SRC` pointing at a
checkout (and `VERL_AGENT_PYTHONPATH` at any extra packages its trainer imports, e.g. openai), the last test
applies patches/verl-agent/ to a copy and runs `verl_cua.testing.verl_agent_check --envs` against the real
modules, unpatched and patched, with real MiniWoB envs."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

FAKE = {
    "agent_system/__init__.py": "",
    "agent_system/environments/__init__.py": "from agent_system.environments.env_manager import make_envs\n",
    "agent_system/environments/env_manager.py": """
        class EnvironmentManagerBase: ...
        def make_envs(config):
            if "sokoban" in config.env.env_name.lower():
                return "builtin", config.env.env_name
            print("Environment not supported"); exit(1)
        """,
    "verl/__init__.py": "",
    "verl/trainer/__init__.py": "",
    "verl/trainer/ppo/__init__.py": "",
    "verl/trainer/ppo/ray_trainer.py": """
        from enum import Enum
        class AdvantageEstimator(str, Enum):
            GRPO = "grpo"; GiGPO = "gigpo"
        def compute_advantage(data, adv_estimator, gamma=1.0, lam=1.0, num_repeat=1, **kwargs):
            if adv_estimator in ("grpo", "gigpo"):
                return ("builtin", adv_estimator, gamma)
            raise NotImplementedError
        class RayPPOTrainer:
            def __init__(self, config):
                self.config = config
                if config.algorithm.adv_estimator in ("grpo", "gigpo"):
                    self.use_critic = False
                else:
                    raise NotImplementedError
        """,
}
PATCHED = """
    ENV_REGISTRY = {}
    def register_env(name):
        def deco(fn):
            ENV_REGISTRY[name] = fn
            return fn
        return deco
    """
PATCHED_RT = """
    ADV_ESTIMATOR_REGISTRY = {}
    def register_adv_est(name, needs_critic=False):
        def deco(fn):
            ADV_ESTIMATOR_REGISTRY[name] = fn
            return fn
        return deco
    """

CHECK = """
import json
from omegaconf import OmegaConf
import agent_system.environments as environments
import verl.trainer.ppo.ray_trainer as rt
from verl_cua.integrations.verl_agent import install
import sys
inst = sys.modules["verl_cua.integrations.verl_agent.install"]  # the package exports the function under this name

calls = []
inst.make_gui_envs = lambda config: calls.append(config.env.env_name) or ("ours", config.env.env_name)
inst.ESTIMATORS["cua_gigpo"] = lambda data, **kw: ("ours", data, kw.get("gamma"))
inst.ESTIMATORS["cua_gigpo"].needs_critic = False
out = {"first": install(), "second": install()}
cfg = lambda name, adv="grpo": OmegaConf.create({"env": {"env_name": name}, "algorithm": {"adv_estimator": adv}})
import agent_system.environments.env_manager as em
if hasattr(em, "ENV_REGISTRY"):
    out["registered_envs"] = sorted(em.ENV_REGISTRY)
    out["registered_estimators"] = sorted(rt.ADV_ESTIMATOR_REGISTRY)
else:
    out["osworld"] = environments.make_envs(cfg("osworld"))
    out["miniwob_task"] = environments.make_envs(cfg("miniwob/click-test"))
    out["sokoban"] = environments.make_envs(cfg("Sokoban"))
    out["ours_adv"] = rt.compute_advantage("DATA", "cua_gigpo", 0.9)
    out["builtin_adv"] = rt.compute_advantage("DATA", "grpo", 0.5)
    try:
        rt.compute_advantage("DATA", "nope")
    except NotImplementedError:
        out["unknown_adv"] = "NotImplementedError"
    trainer = rt.RayPPOTrainer(cfg("osworld", "cua_gigpo"))
    out["trainer"] = [trainer.use_critic, trainer.config.algorithm.adv_estimator]
    out["builtin_trainer"] = rt.RayPPOTrainer(cfg("osworld", "gigpo")).use_critic
out["calls"] = calls
print(json.dumps(out))
"""


def fake_tree(tmp_path, patched=False):
    for rel, text in FAKE.items():
        path = tmp_path / "fake" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        extra = ""
        if patched and rel.endswith("env_manager.py"):
            extra = PATCHED
        if patched and rel.endswith("ray_trainer.py"):
            extra = PATCHED_RT
        path.write_text(textwrap.dedent(text) + textwrap.dedent(extra))
    return tmp_path / "fake"


def run_check(pythonpath: list[Path], script: str = CHECK, args=()) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in [*pythonpath, ROOT])}
    proc = subprocess.run(
        [sys.executable, "-c", script, *args] if script else [sys.executable, *args],
        env=env,
        cwd=pythonpath[0],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_install_on_a_fake_unpatched_verl_agent_wraps_and_delegates(tmp_path):
    out = run_check([fake_tree(tmp_path)])
    assert out["first"] == out["second"] == {"envs": "wrapped", "estimators": "wrapped"}
    assert out["osworld"] == ["ours", "osworld"] and out["miniwob_task"] == ["ours", "miniwob/click-test"]
    assert out["sokoban"] == ["builtin", "Sokoban"]  # not ours: verl-agent's own make_envs
    assert out["ours_adv"] == ["ours", "DATA", 0.9] and out["builtin_adv"] == ["builtin", "grpo", 0.5]
    assert out["unknown_adv"] == "NotImplementedError"
    assert out["trainer"] == [False, "cua_gigpo"] and out["builtin_trainer"] is False  # the name is restored
    assert out["calls"] == ["osworld", "miniwob/click-test"]  # the second install() did not wrap twice


def test_install_on_a_fake_patched_verl_agent_uses_its_registries(tmp_path):
    out = run_check([fake_tree(tmp_path, patched=True)])
    assert out["first"] == {"envs": "registry", "estimators": "registry"} == out["second"]
    assert out["registered_envs"] == ["miniwob", "osworld"] and out["registered_estimators"] == ["cua_gigpo"]


def test_install_without_verl_agent_names_what_to_do(tmp_path):
    script = "from verl_cua.integrations.verl_agent import install\ninstall()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "verl-agent is not importable" in proc.stderr
    assert "patches/verl-agent/UPSTREAM" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(not os.environ.get("VERL_AGENT_SRC"), reason="VERL_AGENT_SRC (a verl-agent checkout) not set")
def test_real_verl_agent_unpatched_and_patched(tmp_path, chromium):
    src = Path(os.environ["VERL_AGENT_SRC"])
    extra = [Path(p) for p in os.environ.get("VERL_AGENT_PYTHONPATH", "").split(os.pathsep) if p]
    copy = tmp_path / "verl-agent"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns(".git", "webshop", "appworld", "alfworld"))
    check = ["-m", "verl_cua.testing.verl_agent_check", "--envs"]
    plain = run_check([copy, *extra], script=None, args=check)
    assert plain["patched"] is False and plain["install"] == {"envs": "wrapped", "estimators": "wrapped"}
    assert plain["ok"] and plain["unknown_env"] == "exit 1"
    apply = ["bash", str(ROOT / "patches/verl-agent/apply.sh"), str(copy)]
    first = subprocess.run(apply, capture_output=True, text=True, check=True).stdout
    second = subprocess.run(apply, capture_output=True, text=True, check=True).stdout
    assert first.count("applied: ") == 2 and "already" not in first and second.count("already applied: ") == 2
    patched = run_check([copy, *extra], script=None, args=check)
    assert patched["patched"] is True and patched["install"] == {"envs": "registry", "estimators": "registry"}
    assert patched["ok"] and "known environments: alfworld" in patched["unknown_env"]
