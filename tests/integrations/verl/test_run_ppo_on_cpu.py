"""`python -m verl_cua.main` trains through verl's own `run_ppo` and `TaskRunnerV1`: verl's launch settings reach
the Ray workers (here `rollout.full_determinism`, which only `run_ppo` turns into the workers' environment), and
our runner is verl's runner with our trainer plugged in, not a copy of it."""

import json
import subprocess
import sys
import textwrap

import pytest

from verl_cua.testing.tiny_models import build_tiny_model

PROBE = textwrap.dedent(
    """
    import json, os, sys
    import ray
    from verl_cua import main
    from verl_cua.integrations.verl import task_runner
    from verl_cua.testing.cpu_config import cpu_config

    out, model, *overrides = sys.argv[1:]

    @ray.remote(num_cpus=1)
    class ProbeRunner:  # stands where CuaTaskRunner runs: a Ray actor started by verl's run_ppo
        def run(self, config):
            keys = ("VERL_FULL_DETERMINISM", "PYTHONHASHSEED", "TRANSFER_QUEUE_ENABLE", "VERL_PLATFORM")
            seen = {key: os.environ.get(key) for key in keys}
            seen["transfer_queue.enable"] = bool(config.transfer_queue.enable)
            with open(out, "w") as f:
                json.dump(seen, f)

    task_runner.CuaTaskRunner = ProbeRunner
    main.run(cpu_config(model, "ray_kwargs.ray_init.num_cpus=4", "+ray_kwargs.ray_init.include_dashboard=false",
                        *overrides))
    """
)


def _probe(tmp_path, *overrides: str) -> dict:
    out = tmp_path / "seen.json"
    model = str(build_tiny_model("qwen25vl"))
    env = {"VERL_PLATFORM": "cpu", "RAY_DEDUP_LOGS": "0", "PATH": "/usr/bin:/bin"}  # nothing else to inherit
    cmd = [sys.executable, "-c", PROBE, str(out), model, *overrides]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.e2e
def test_full_determinism_reaches_the_ray_workers(tmp_path):
    seen = _probe(tmp_path, "actor_rollout_ref.rollout.full_determinism=true", "actor_rollout_ref.rollout.seed=7")
    assert seen["VERL_FULL_DETERMINISM"] == "1"
    assert seen["PYTHONHASHSEED"] == "7"
    assert seen["TRANSFER_QUEUE_ENABLE"] == "1" and seen["transfer_queue.enable"]
    assert seen["VERL_PLATFORM"] == "cpu"  # forwarded through ray_init.runtime_env


def test_the_runner_is_verls_runner_with_our_trainer(monkeypatch):
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from verl_cua.integrations.verl.task_runner import CuaTaskRunner, trainer_for_mode

    ours = CuaTaskRunner.__ray_metadata__.modified_class
    assert issubclass(ours, TaskRunnerV1.__ray_metadata__.modified_class)
    own = next(cls for cls in ours.__mro__ if cls.__module__ == "verl_cua.integrations.verl.task_runner")
    assert [name for name, value in vars(own).items() if callable(value)] == ["run"]  # the rest is upstream's

    class Mine(PPOTrainerSync):
        pass

    with trainer_for_mode("sync", Mine):
        assert get_trainer_cls("sync") is Mine
    assert get_trainer_cls("sync") is PPOTrainerSync


def test_another_trainer_mode_is_one_line(tmp_path):
    from verl_cua.integrations.verl.config.fields import CuaConfigError
    from verl_cua.main import run
    from verl_cua.testing.cpu_config import cpu_config

    config = cpu_config(str(build_tiny_model("qwen25vl")), "trainer.v1.trainer_mode=async")
    with pytest.raises(CuaConfigError, match=r"trainer.v1.trainer_mode='async' is not valid; valid: sync"):
        run(config)
