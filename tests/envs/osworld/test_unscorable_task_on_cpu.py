"""A task this install cannot score ends only its own episode, masked under a named error, on a desktop the pool
keeps: one whose cache file cannot be staged (found at reset, before the desktop is touched) and one whose metric
needs a package that is not installed (found at evaluation). The next episode runs on the same desktop. Real local
desktop, OSWorld's DesktopEnv and its evaluators, our EnvPool."""

import json

from verl_cua.envs import EnvPool, make_env
from verl_cua.envs.osworld import evaluators

SCREEN = (800, 600)
ECHO = {"type": "vm_command_line", "command": "echo ok", "shell": True}
GOOD = {
    "id": "unscorable-control",
    "instruction": "Nothing to do.",
    "config": [],
    "evaluator": {"func": "exact_match", "result": ECHO, "expected": {"type": "rule", "rules": {"expected": "ok\n"}}},
}
# metrics whose package the test install may lack (the osworld-evaluators extra), by the package
NEEDS_A_PACKAGE = {
    "compare_pptx_files": "python-pptx",
    "check_structure_sim": "scikit-image",
    "compare_pdfs": "pymupdf",
}


def _unstageable(tmp_path) -> str:
    """A task that validates but whose cache_file getter reads a file that is not beside its JSON."""
    path = tmp_path / "unstageable.json"
    task = {**GOOD, "id": "unscorable-stage"}
    task["evaluator"] = {**GOOD["evaluator"], "result": {"type": "cache_file", "path": "absent.txt"}}
    path.write_text(json.dumps(task))
    return str(path)


def _unscorable_metric() -> dict | None:
    """A task whose metric needs a package this install lacks; None on an install with all of them (the CI venv
    has none of them: tests/run.sh installs no osworld-evaluators)."""
    evaluators.install()
    for name, package in NEEDS_A_PACKAGE.items():
        if evaluators.missing_package(evaluators.metric(name)) == package:
            return {**GOOD, "id": "unscorable-metric", "evaluator": {"func": name, "result": ECHO, "expected": ECHO}}
    return None


def test_an_unscorable_task_masks_only_its_episode_and_keeps_the_desktop(local_desktop, tmp_path):
    factory = lambda: make_env("osworld", provider="local", action_format="pyautogui", pause=0.2, screen=SCREEN)  # noqa: E731
    with EnvPool(factory, 1) as pool:
        with pool.acquire() as lease:
            assert lease.reset(GOOD).screenshot is not None and not lease.infra_failure
            desktop, pids = lease.env, lease.env.pids()
            assert pids and lease.evaluate() == 1.0  # a real desktop: its command ran and its metric scored it
        with pool.acquire() as lease:
            obs = lease.reset(_unstageable(tmp_path))
            assert lease.infra_failure and obs.extra["infra_failure"]
            assert lease.error.startswith("unscorable: cannot stage unscorable-stage: ") and "absent.txt" in lease.error
            assert lease.step("pyautogui.click(10, 10)").info["infra_failure"] and lease.evaluate() == 0.0
        metric_task = _unscorable_metric()
        if metric_task is not None:
            with pool.acquire() as lease:
                lease.reset(metric_task)
                lease.step("DONE")
                assert lease.evaluate() == 0.0 and lease.infra_failure
                assert lease.error.startswith("unscorable: this OSWorld evaluator needs the package ")
        with pool.acquire() as lease:  # the same desktop, never rebuilt
            assert lease.env is desktop and lease.env.pids() == pids
            lease.reset(GOOD)
            lease.step("DONE")
            assert lease.evaluate() == 1.0 and not lease.infra_failure
        stats = pool.stats()
    assert stats["unscorable"] == 1 + (metric_task is not None) and stats["restarts"] == 0
    assert stats["infra_failures"] == 0
