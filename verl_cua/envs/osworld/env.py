"""The `osworld` env: OSWorld's own DesktopEnv (client, setup controller, evaluators) on any provider.

`provider="local"` runs the task on a sandboxed Xvfb desktop on this host (no VM); `docker` is OSWorld's docker
provider made fit for many desktops at once (`docker_fleet`: lock waits, spaced starts, labelled containers); every
other name (vmware, virtualbox, aws, azure, gcp, aliyun, volcengine) is OSWorld's own provider, passed through.
Actions are parsed by verl_cua.actions and rendered to the `pyautogui` or `computer_13` action space; model
text is never executed. An app API call (the `api_gui` format's `CalcTools.set_cell_value(...)`, a GUIAction of kind
`api`) is checked against its spec and run inside the desktop by `apis.runner`; its result text is `info["api_result"]`
and `obs.extra["api_result"]`, and a failing API is the agent's problem (a valid action whose result says why). With
`action_format="api_gui"` every observation's `extra["focused_app"]` names the app of the active window. Step reward
is 0; the score comes from `evaluate()` (OSWorld's metric, in [0, 1]).

Whose failure a broken desktop is: before the agent's first action it is an infra failure (`InfraFailure`,
`info["infra_failure"]`; the trainer masks it). Once an action was sent, a dead or unhealthy desktop is the agent's
failure: the episode ends, scores 0 and says `info["desktop_broken"]` / `env.desktop_broken` (counted apart), since
a policy could otherwise turn any failing episode into a masked one with one `pkill`. Only a host-side fault the
agent cannot cause (the local desktop's keeper gone) stays an infra failure after that. A score the evaluator
computed is never discarded.
"""

from __future__ import annotations

import io
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from verl_cua.actions import ParsedAction
from verl_cua.actions.types import GUIAction
from verl_cua.envs.base import (
    EnvUsageError,
    InfraFailure,
    Observation,
    StepResult,
    TaskUnscorable,
    begin_step,
    step_info,
)
from verl_cua.envs.calls import CallTimeout, call_with_timeout
from verl_cua.envs.observation import (
    DEFAULT_BUDGET,
    a11y_elements,
    check_observation,
    shows_elements,
    with_elements,
)
from verl_cua.envs.osworld import PROVIDERS, evaluators
from verl_cua.envs.osworld.metric_child import MetricChildBroken
from verl_cua.envs.osworld.tasks import TaskError, load_task, stage_cache

logger = logging.getLogger(__name__)

ACTION_SPACES = ("pyautogui", "computer_13")
TERMINAL = ("WAIT", "DONE", "FAIL")
DEFAULT_PAUSE = {"local": 0.5}  # seconds after an action before the screenshot; OSWorld's VMs use 2.0
API_FORMAT = "api_gui"  # the action format whose observations name the focused app
API_SETTLE = 0.5  # seconds the app gets to take keys sent in a step before an API call of the same step


EVALUATE_TIMEOUT = 90.0  # the whole evaluation, under the pool's evaluate_timeout (120 s), which would mask it
LATE_EVALUATION_WAIT = 120.0  # a reset after an evaluation that ran past its timeout waits this long for it to end


class ActionTimeout(RuntimeError):
    """An action that reached the desktop got no answer within `action_timeout`, and the host saw no fault of its own:
    the agent's failure (its output's run time is bounded at parse time, so only what it did can make it wait)."""


class OSWorldEnv:
    """One OSWorld desktop. `reset(task)` takes a task dict, a JSON path, or a name in our task set.

    `observation`: one of OSWorld's four types; beyond `screenshot`, the desktop's AT-SPI tree is read every turn,
    and `extra` holds its elements (`elements`) and their table or marks (`elements_text`, trimmed to
    `observation_tokens`); `som` also numbers the marks on the screenshot."""

    def __init__(
        self,
        provider: str = "local",
        *,
        action_space: str = "pyautogui",
        action_format: str | None = None,
        screen: tuple[int, int] = (1920, 1080),
        pause: float | None = None,
        require_a11y_tree: bool = False,
        require_terminal: bool = False,
        cache_dir: str | None = None,
        start_timeout: float = 60.0,
        settle_timeout: float = 30.0,
        action_timeout: float = 30.0,
        evaluate_timeout: float = EVALUATE_TIMEOUT,
        observation: str = "screenshot",
        observation_tokens: int = DEFAULT_BUDGET,
        **provider_kwargs: Any,
    ):
        if provider not in PROVIDERS:
            raise ValueError(f"unknown OSWorld provider {provider!r}; valid providers: {', '.join(PROVIDERS)}")
        if action_space not in ACTION_SPACES:
            raise ValueError(f"unknown action_space {action_space!r}; valid: {', '.join(ACTION_SPACES)}")
        self.observation = check_observation(observation)
        self.observation_tokens = int(observation_tokens)
        require_a11y_tree = require_a11y_tree or shows_elements(self.observation)  # the table reads the tree
        evaluators.install()  # before desktop_env.desktop_env imports `metrics, getters`
        self.provider = provider
        self.action_space = action_space
        self.action_format = action_format
        self.pause = DEFAULT_PAUSE.get(provider, 2.0) if pause is None else float(pause)
        self.settle_timeout = float(settle_timeout)
        # local desktop: an action (execute + screenshot) with no answer after this long finds a frozen desktop (the
        # agent can stop its own server); it must stay under the pool's step_timeout, which would mask it as infra
        self.action_timeout = float(action_timeout)
        self.evaluate_timeout = float(evaluate_timeout)
        self._own_cache = cache_dir is None
        self.cache_dir = Path(cache_dir or tempfile.mkdtemp(prefix="verl-cua-osworld-cache-"))
        self.local = None
        self.docker = None  # provider="docker": our LabelledDockerProvider (docker_fleet)
        self._task: dict | None = None
        self._last: Observation | None = None
        self._done = False
        self._acted = False  # an action reached the desktop this episode: from then on a broken desktop is the agent's
        self.desktop_broken = False  # the agent broke its desktop this episode (scored 0, not masked)
        self.last_eval_error: str | None = None
        self._late_evaluation: threading.Thread | None = None  # an evaluation that ran past evaluate_timeout
        kwargs = dict(
            action_space=action_space, screen_size=tuple(screen), headless=True, cache_dir=str(self.cache_dir),
            require_a11y_tree=require_a11y_tree, require_terminal=require_terminal,
        )  # fmt: skip
        try:
            if provider == "local":
                from verl_cua.envs.osworld.local_desktop import LocalDesktop
                from verl_cua.envs.osworld.provider import LocalProvider, LocalVMManager, desktop_env_with_provider

                network = provider_kwargs.pop("network", None)
                if provider_kwargs:
                    raise ValueError(f"the local provider takes no {', '.join(sorted(provider_kwargs))}")
                self.local = LocalDesktop(screen=tuple(screen), start_timeout=start_timeout, network=network)
                self._desktop = desktop_env_with_provider(LocalVMManager(), LocalProvider(self.local), **kwargs)
                self._tighten_retries()
            elif provider == "docker":
                from desktop_env.providers.docker.manager import DockerVMManager

                from verl_cua.envs.osworld import docker_fleet
                from verl_cua.envs.osworld.provider import desktop_env_with_provider

                options = docker_fleet.pop_options(provider_kwargs)
                self.docker = docker_fleet.LabelledDockerProvider(provider_kwargs.get("region"), options)
                self._desktop = desktop_env_with_provider(DockerVMManager(), self.docker, **kwargs, **provider_kwargs)
            else:
                from desktop_env.desktop_env import DesktopEnv

                docker_only = sorted(k for k in provider_kwargs if k.startswith("docker_"))
                if docker_only:
                    raise ValueError(f"{', '.join(docker_only)}: for provider='docker' only, not {provider!r}")
                self._desktop = DesktopEnv(provider_name=provider, **kwargs, **provider_kwargs)
        except ImportError as exc:
            raise ImportError(f"the osworld env needs OSWorld's client ({exc}): verl-cua install-osworld") from exc
        except (ValueError, EnvUsageError):
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise InfraFailure(f"OSWorld {provider} desktop did not start: {type(exc).__name__}: {exc}") from exc

    # -- GUIEnv -------------------------------------------------------------------------------------------------
    def reset(self, task: Any) -> Observation:
        """Revert the desktop if used, run the task's setup steps, and return the first screenshot."""
        config, base = load_task(task)
        self._wait_for_late_evaluation()
        try:
            stage_cache(config, base, self.cache_dir)
        except TaskError as exc:  # the task's defect, found before the desktop was touched: this episode only
            raise TaskUnscorable(f"cannot stage {config['id']}: {exc}") from None
        self._check_alive("reset")
        self._task, self._last, self._done = config, None, False
        self._acted = self.desktop_broken = False
        try:
            if self.local is not None:
                self.local.begin_setup()
            obs = self._desktop.reset(task_config=config)
            self._tighten_retries()
            if self.local is not None:
                obs = self._settle(config["id"])
            self._last = self._observation(obs)
        except InfraFailure:
            self._task = None
            raise
        except Exception as exc:
            self._task = None
            raise InfraFailure(f"OSWorld reset of {config['id']} failed: {type(exc).__name__}: {exc}") from exc
        return self._last

    def step(self, action: ParsedAction | str, *, format: str | None = None) -> StepResult:
        """Render one model output to the action space and send it; an invalid output is not sent."""
        start = begin_step(self._last, self._done, action, format or self.action_format, self._render)
        if isinstance(start, StepResult):
            return start
        parsed, payloads = start
        done = False
        api_result = None
        try:
            self._check_alive("step")
            self._acted = True
            self._desktop.is_environment_used = True  # any action, an API call too: the next reset reverts
            obs, done, api_result = self._send(payloads)
            self._last = self._observation(obs, api_result)
        except Exception as exc:
            self._done = True
            err = str(exc) if isinstance(exc, InfraFailure) else f"OSWorld step failed: {type(exc).__name__}: {exc}"
            if self._agents_fault():
                self.desktop_broken = True
                info = step_info(action_valid=True, desktop_broken=True, error=f"the agent broke its desktop: {err}")
                return StepResult(self._last, 0.0, True, info)
            return StepResult(self._last, 0.0, True, step_info(action_valid=True, infra_failure=True, error=err))
        self._done = bool(done) or parsed.terminal is not None
        extra = {"api_result": api_result} if self._reports_api(payloads) else {}
        return StepResult(self._last, 0.0, self._done, step_info(action_valid=True, **extra))

    def evaluate(self) -> float:
        """OSWorld's metric in [0, 1]; 0 when the agent broke its desktop; InfraFailure when the desktop broke without
        the agent (before its first action, or a host-side fault); a crashing metric on a healthy desktop gives 0."""
        if self._task is None:
            raise EnvUsageError("evaluate() before reset()")
        self.last_eval_error = None
        if self.desktop_broken:
            return 0.0
        if not self.healthy():
            return self._broken("before evaluate")
        if self.local is not None:
            self.local.prepare()  # the next episode's sandbox boots while this one is evaluated
        try:
            score = float(self._bounded_evaluation())
        except evaluators.MissingDependency:
            raise
        except MetricChildBroken as exc:  # our own failure: never the agent's 0
            raise InfraFailure(f"evaluating {self._task['id']}: {exc}") from exc
        except CallTimeout:
            return self._evaluation_timed_out()
        except Exception as exc:
            if not self.healthy():
                return self._broken(f"during evaluate ({type(exc).__name__}: {exc})")
            self.last_eval_error = f"{type(exc).__name__}: {exc}"
            logger.warning("OSWorld metric for %s raised (scored 0): %s", self._task["id"], self.last_eval_error)
            return 0.0
        return min(1.0, max(0.0, score))  # computed: never discarded by a later health check

    def close(self) -> None:
        """Stop the desktop (local: kill its process tree; docker: remove its containers) and remove our cache."""
        if self.docker is not None:
            self.docker.close()  # by label, even one still starting: no graceful stop (10 s + 3 s) of a disposable VM
        desktop = getattr(self, "_desktop", None)
        if desktop is not None and self.docker is None:
            try:
                desktop.close()
            except Exception:
                logger.debug("closing a dead OSWorld desktop", exc_info=True)
        self._desktop = None
        if self.local is not None:
            self.local.stop()
        if self._own_cache:
            shutil.rmtree(self.cache_dir, ignore_errors=True)

    # -- health and processes (EnvPool) ---------------------------------------------------------------------------
    def healthy(self) -> bool:
        """Whether the desktop answers (local: server and Xvfb up; VM: a screenshot comes back)."""
        if getattr(self, "_desktop", None) is None:
            return False
        if self.local is not None:
            return self.local.healthy()
        try:
            return self._desktop.controller.get_screenshot() is not None
        except Exception:
            return False

    def pids(self) -> list[int]:
        """The local desktop's process tree (none for a VM provider)."""
        return self.local.pids() if self.local is not None else []

    def kill(self) -> None:
        """Kill the desktop at once (the pool's last resort): local, its process tree; docker, its containers."""
        if self.local is not None:
            self.local.stop()
        elif self.docker is not None:
            self.docker.close()
        else:
            self.close()

    @property
    def desktop_env(self):
        """The underlying OSWorld DesktopEnv (for getters and debugging)."""
        return self._desktop

    # -- internals ------------------------------------------------------------------------------------------------
    def _render(self, parsed: ParsedAction) -> list:
        """Payloads in order: the action space's rendering of each run of GUI actions, and each api action as a
        GUIAction with its arguments checked against its spec (ActionError, a ValueError: an invalid action)."""
        if not any(a.kind == "api" for a in parsed.actions) or parsed.code is not None:
            return self._render_gui(parsed)
        out, run = [], []
        for action in [*parsed.actions, None]:
            if action is not None and action.kind != "api":
                run.append(action)
                continue
            if run:
                out.extend(self._render_gui(ParsedAction(valid=True, actions=run, format=parsed.format)))
                run = []
            if action is not None:
                from verl_cua.actions.apis import lookup_api

                tool, _, name = (action.api or "").partition(".")
                args = lookup_api(tool, name).bind([], dict(action.args or {}))
                out.append(GUIAction("api", api=action.api, args=args))
        return out

    def _render_gui(self, parsed: ParsedAction) -> list:
        if self.action_space == "pyautogui":
            return [parsed.to_pyautogui()]
        out = []
        for action in parsed.to_computer13():
            kind = action["action_type"]
            out.append(kind if kind in TERMINAL else action)  # DesktopEnv ends episodes on the bare words only
        return out

    def _send(self, payloads: list) -> tuple[dict, bool, str | None]:
        """Send the rendered action to the desktop; the last observation, DesktopEnv's done flag and the result
        text of the last API called (None: none)."""

        def send() -> tuple[dict, bool, str | None]:
            done, api_result = False, None
            for i, payload in enumerate(payloads):
                last = i == len(payloads) - 1
                if isinstance(payload, GUIAction):
                    if i > 0 and not isinstance(payloads[i - 1], GUIAction):  # keys sent just now: let the app
                        time.sleep(max(self.pause, API_SETTLE))  # take them before an API reads or edits its state
                    api_result = self._run_api(payload)
                    if last:
                        time.sleep(self.pause)  # the app repaints
                        obs = self._desktop._get_obs()
                    continue
                obs, _reward, done, _info = self._desktop.step(payload, pause=self.pause if last else 0.0)
            return obs, done, api_result

        if self.local is None:
            return send()
        try:
            return call_with_timeout(send, self.action_timeout)
        except CallTimeout:
            if fault := self.local.host_fault():
                raise InfraFailure(f"the desktop stopped answering: {fault}") from None
            raise ActionTimeout(f"the action got no answer within action_timeout ({self.action_timeout:g} s)") from None

    def _run_api(self, action: GUIAction) -> str:
        """Run one checked API call inside the desktop; its result text (a failed API's says why)."""
        from verl_cua.actions.types import ActionError
        from verl_cua.envs.osworld.apis.runner import DEFAULT_TIMEOUT, run_api

        timeout = max(1.0, min(DEFAULT_TIMEOUT, self.action_timeout - 10.0))  # answers before the step's timeout
        try:
            outcome = run_api(self._desktop, action, timeout=timeout)
        except ActionError as exc:  # checked in _render already; never a broken desktop
            return f"error: {exc}"
        return outcome.result if outcome.ok else f"error: {outcome.result}"

    def _reports_api(self, payloads: list) -> bool:
        return self.action_format == API_FORMAT or any(isinstance(p, GUIAction) for p in payloads)

    def _agents_fault(self) -> bool:
        """Whether a broken desktop is the agent's doing: an action reached it and no host-side fault explains it."""
        return self._acted and not (self.local is not None and self.local.host_fault())

    def _broken(self, when: str) -> float:
        """A desktop found dead or unhealthy at evaluation: 0 and `desktop_broken` when it is the agent's fault."""
        if self._agents_fault():
            self.desktop_broken = True
            logger.info("%s: the agent broke its desktop (found %s); scored 0", self._task["id"], when)
            return 0.0
        raise InfraFailure(f"the desktop was not healthy {when} {self._task['id']}")

    def _bounded_evaluation(self) -> float:
        """`_evaluate` in a thread, bounded by `evaluate_timeout` (CallTimeout). A local desktop whose evaluation ran
        past it is stopped at once (what is left of the evaluation then fails fast), and the next reset waits for
        that thread first, so that nothing of this evaluation reaches the next episode's desktop."""
        try:
            return call_with_timeout(self._evaluate, self.evaluate_timeout)
        except CallTimeout as exc:
            self._late_evaluation = exc.worker
            if self.local is not None:
                self.local.stop()
            raise

    def _wait_for_late_evaluation(self) -> None:
        """Before a reset: the evaluation that ran past its bound must be over (InfraFailure if it is not)."""
        late, self._late_evaluation = self._late_evaluation, None
        if late is not None:
            late.join(LATE_EVALUATION_WAIT)
            if late.is_alive():
                raise InfraFailure(f"the last evaluation still runs {LATE_EVALUATION_WAIT:g} s after its timeout")

    def _evaluate(self) -> float:
        """DesktopEnv's evaluation; on a local desktop, its commands run as the server's user meanwhile."""
        if self.local is None:
            return self._desktop.evaluate()
        with self.local.evaluation():
            return self._desktop.evaluate()

    def _evaluation_timed_out(self) -> float:
        """An evaluation past `evaluate_timeout`: infra before the first action or for a host-side fault, otherwise
        the agent's 0 (what it left running can only slow the evaluator's commands, never mask the episode)."""
        reason = f"the evaluation ran past evaluate_timeout ({self.evaluate_timeout:g} s)"
        if not self._agents_fault():
            fault = self.local.host_fault() if self.local is not None else None
            raise InfraFailure(f"{reason} on {self._task['id']}" + (f": {fault}" if fault else ""))
        self.last_eval_error = reason
        logger.info("%s: %s after the agent acted; scored 0", self._task["id"], reason)
        return 0.0

    def _check_alive(self, what: str) -> None:
        if getattr(self, "_desktop", None) is None:
            raise InfraFailure(f"OSWorld desktop is closed ({what})")
        if self.local is not None:
            if what != "reset" and not self.local.alive():  # a reset starts a new sandbox anyway
                raise InfraFailure(f"local desktop died before {what}")
            from verl_cua.envs.osworld.local_desktop import NETRC

            NETRC.ensure()

    def _settle(self, task_id: str) -> dict:
        """Local desktop: a failed setup step fails the reset; wait for the launched apps' windows, then look again."""
        from verl_cua.envs.osworld.local_desktop import install_hint

        report = self.local.settle(self.settle_timeout)
        if report["failures"]:
            named = "; ".join(f + install_hint(f) for f in report["failures"])
            raise InfraFailure(f"OSWorld setup of {task_id} failed: {named}")
        if report["pending"]:
            logger.warning(
                "%s: no window from %s after %.0f s (settle_timeout)",
                task_id, ", ".join(report["pending"]), self.settle_timeout,
            )  # fmt: skip
        return self._desktop._get_obs()  # what the agent sees once the apps are up

    def _tighten_retries(self) -> None:
        """OSWorld's client retries 3x with 5 s sleeps; a local desktop answers in ms or is dead."""
        if self.local is not None:
            for controller in (self._desktop.controller, self._desktop.setup_controller):
                if hasattr(controller, "retry_interval"):
                    controller.retry_interval = 0.2

    def _observation(self, obs: dict, api_result: str | None = None) -> Observation:
        data = obs.get("screenshot")
        if not data:
            raise InfraFailure("the desktop returned no screenshot")
        image = Image.open(io.BytesIO(data))
        image.load()
        extra = {"task_id": self._task["id"] if self._task else None}
        for key in ("accessibility_tree", "terminal"):
            if obs.get(key) is not None:
                extra[key] = obs[key]
        if self.action_format == API_FORMAT or api_result is not None:
            extra["api_result"] = api_result
        if self.action_format == API_FORMAT:
            from verl_cua.envs.osworld.apis.runner import focused_app

            extra["focused_app"] = focused_app(self._desktop)
        if image.mode != "RGB":
            image = image.convert("RGB")
        if shows_elements(self.observation):  # the desktop's coordinates are the screenshot's pixels
            elements = a11y_elements(obs.get("accessibility_tree"))
            image, read = with_elements(self.observation, image, elements, "a11y", self.observation_tokens)
            extra.update(read)
        return Observation(image, obs.get("instruction") or "", extra)


def start_timeout(pool_size: int, kwargs: Mapping[str, Any]) -> float | None:
    """Seconds a pool of `pool_size` should give one start of an OSWorld env built with `kwargs` (its record's
    `start_timeout`): docker's lock wait and boot for the fleet; None (the pool's default) for other providers."""
    if kwargs.get("provider", "local") != "docker":
        return None
    try:
        from verl_cua.envs.osworld import docker_fleet
    except ImportError:
        return None  # no OSWorld client: the start itself fails with the install hint
    return docker_fleet.start_timeout(pool_size, docker_fleet.pop_options(dict(kwargs)))
