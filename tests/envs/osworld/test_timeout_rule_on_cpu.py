"""Every branch of the timeout rule (docs/sandbox.md): once an action reached the desktop, an action or an evaluation
that runs past its timeout is the agent's failure, unless the host sees a fault of its own; before the first action
it is infra. The desktop here is a fake (named `Hanging...`): a real one cannot be made to hang on cue without the
agent's help, which the attack tests in test_local_desktop_machinery_on_cpu.py provide."""

import contextlib
import io
import time

import pytest
from PIL import Image

from verl_cua.envs.base import InfraFailure, Observation
from verl_cua.envs.osworld.env import OSWorldEnv

pytest.importorskip("desktop_env")
PNG = io.BytesIO()
Image.new("RGB", (64, 48)).save(PNG, format="PNG")


class HangingDesktopEnv:
    """A stand-in for OSWorld's DesktopEnv whose step and evaluate take `hang` seconds."""

    def __init__(self, hang: float):
        self.hang, self.is_environment_used = hang, False

    def step(self, payload, pause=0.0):
        time.sleep(self.hang)
        return {"screenshot": PNG.getvalue()}, 0.0, False, {}

    def evaluate(self):
        time.sleep(self.hang)
        return 1.0


class FakeLocalDesktop:
    """A stand-in for LocalDesktop: healthy, with or without a host-side fault."""

    def __init__(self, fault: str | None = None):
        self.fault = fault

    def host_fault(self):
        return self.fault

    def alive(self):
        return True

    def healthy(self):
        return True

    def prepare(self):
        pass

    def stop(self):
        self.stopped = True

    @contextlib.contextmanager
    def evaluation(self):
        yield


def _env(hang: float, fault: str | None = None) -> OSWorldEnv:
    env = object.__new__(OSWorldEnv)  # no desktop to boot: the fakes stand in for it
    env.provider, env.action_space, env.action_format, env.pause = "local", "pyautogui", "pyautogui", 0.0
    env.action_timeout, env.evaluate_timeout = 0.5, 0.5
    env.local, env._desktop, env.docker, env.observation = (
        FakeLocalDesktop(fault),
        HangingDesktopEnv(hang),
        None,
        "screenshot",
    )
    env._task, env._done, env._acted, env.desktop_broken, env.last_eval_error = {"id": "t"}, False, False, False, None
    env._late_evaluation = None
    env._last = Observation(Image.new("RGB", (64, 48)), "", {})
    return env


def test_an_action_past_its_timeout_is_the_agents_failure_and_marks_the_env_used():
    env = _env(hang=2.0)
    result = env.step("pyautogui.click(1, 1)")
    assert result.done and result.info["desktop_broken"] and not result.info["infra_failure"], result.info
    assert "action_timeout" in result.info["error"] and env._desktop.is_environment_used
    assert env.evaluate() == 0.0


def test_an_action_past_its_timeout_with_a_host_fault_is_infra():
    env = _env(hang=2.0, fault="the desktop's keeper exited (-9)")
    result = env.step("pyautogui.click(1, 1)")
    assert result.done and result.info["infra_failure"] and not result.info.get("desktop_broken")
    assert "keeper exited" in result.info["error"]


def test_an_action_in_time_is_just_an_action():
    env = _env(hang=0.0)
    result = env.step("pyautogui.click(1, 1)")
    assert not result.done and result.info["action_valid"] and not result.info["infra_failure"]


def test_an_evaluation_past_its_timeout_after_an_action_scores_zero_and_the_next_reset_waits_for_it():
    env = _env(hang=0.0)
    env.step("pyautogui.click(1, 1)")
    env._desktop.hang = 2.0
    assert env.evaluate() == 0.0 and "evaluate_timeout" in env.last_eval_error
    assert env.local.stopped  # what is left of it fails fast on a desktop that is gone
    start = time.monotonic()
    env._wait_for_late_evaluation()  # what reset() does first: nothing of it may reach the next episode's desktop
    assert 1.0 < time.monotonic() - start < 3.0 and env._late_evaluation is None


def test_a_timeout_raised_inside_the_evaluation_is_not_the_evaluations_timeout():
    env = _env(hang=0.0)
    env.step("pyautogui.click(1, 1)")

    def socket_timeout():
        raise TimeoutError("a getter's socket timed out")

    env._desktop.evaluate = socket_timeout  # healthy desktop, crashing getter: a 0 with its reason, never infra
    assert env.evaluate() == 0.0 and "socket timed out" in env.last_eval_error


def test_an_evaluation_past_its_timeout_before_any_action_or_with_a_host_fault_is_infra():
    with pytest.raises(InfraFailure, match="evaluate_timeout"):
        _env(hang=2.0).evaluate()
    env = _env(hang=0.0, fault="the desktop's keeper exited (-9)")
    env._acted, env._desktop.hang = True, 2.0
    with pytest.raises(InfraFailure, match="keeper exited"):
        env.evaluate()


def test_an_evaluation_in_time_keeps_its_score():
    env = _env(hang=0.0)
    env.step("pyautogui.click(1, 1)")
    assert env.evaluate() == 1.0


def test_an_evaluator_command_is_bounded_by_its_own_timeout_and_runs_as_the_machinery():
    from verl_cua.envs.osworld import desktop_server

    desktop = object.__new__(desktop_server.Desktop)  # the routing alone: no display, no launcher
    calls = []
    desktop.run = lambda command, shell, timeout, cwd="/": calls.append(("machinery", timeout))
    desktop.run_as_agent = lambda command, shell, timeout, cwd="/": calls.append(("agent", timeout))
    for phase in ("evaluate", "act"):
        desktop.phase = phase
        desktop.command("true", shell=True, timeout=desktop_server.EXEC_TIMEOUT)
    assert calls == [("machinery", desktop_server.EVALUATOR_TIMEOUT), ("agent", desktop_server.EXEC_TIMEOUT)]
    from verl_cua.envs.osworld.env import EVALUATE_TIMEOUT

    assert desktop_server.EVALUATOR_TIMEOUT <= EVALUATE_TIMEOUT / 2  # well under the evaluation's own bound


def test_the_machinerys_commands_read_no_configuration_of_the_agents(monkeypatch):
    from verl_cua.envs.osworld import desktop_server

    desktop = object.__new__(desktop_server.Desktop)
    desktop.machinery_dir = "/tmp/.verl-cua-machinery"
    for key, value in {"GTK_MODULES": "gail:atk-bridge", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
                       "HOME": "/home/user", "LD_PRELOAD": "/home/user/evil.so"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    env = desktop.machinery_env()
    assert "GTK_MODULES" not in env and "DBUS_SESSION_BUS_ADDRESS" not in env and "LD_PRELOAD" not in env
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["PYTHONSAFEPATH"] == "1" and env["HOME"] == "/home/user"
    assert all(env[k].startswith("/tmp/.verl-cua-machinery/") for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"))
