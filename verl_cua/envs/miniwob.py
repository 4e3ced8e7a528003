"""MiniWoB++ in headless Debian Chromium (PyPI `miniwob` 1.1.0): screenshots in, `ParsedAction`s out."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Any

from PIL import Image

from verl_cua.actions import GUIAction, ParsedAction
from verl_cua.envs.base import EnvUsageError, InfraFailure, Observation, StepResult, begin_step, step_info
from verl_cua.envs.observation import DEFAULT_BUDGET, check_observation, dom_elements, shows_elements, with_elements
from verl_cua.envs.task_sets import TaskRef, parse_seeds
from verl_cua.resources import install_hint

logger = logging.getLogger(__name__)

CHROME_BINARY = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# MiniWoB starts the keeper as its ChromeDriver (unless MINIWOB_CHROMEDRIVER is the user's own): it runs the real one
# ($VERL_CUA_CHROMEDRIVER) in a process group it leads and SIGKILLs that group when its owner (this process) dies.
KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser_keeper.sh")
KEEPER_MARK = "VERL_CUA_BROWSER_KEEPER"  # "<keeper pid>:<uuid>" in the environment of every process it starts
REAL_CHROMEDRIVER = "VERL_CUA_CHROMEDRIVER"
PIP_HINT = install_hint("miniwob")
APT_HINT = "apt-get install -y --no-install-recommends chromium chromium-driver fonts-liberation"
MAX_SCROLL_REPEAT = 10
NO_TIME_LIMIT_MS = 2**31 - 1  # the longest a browser timer waits (about 24.8 days)
# MiniWoB ends every episode with -1 "timed out" after core.EPISODE_MAX_TIME of wall time (10 s for most tasks),
# counted from reset, while the model thinks. Re-arm that timer with the env's own limit (same callback).
_REARM_TIMER = """
const limit = arguments[0];
if (core.EP_TIMER === null) { return false; }
clearTimeout(core.EP_TIMER);
core.EPISODE_MAX_TIME = limit;
core.EP_TIMER = setTimeout(function () { core.endEpisode(-1, false, 'timed out'); }, limit);
return true;
"""
TYPE_CHUNK = 64  # MiniWoB's TYPE_TEXT limit

_WEBDRIVER_KEYS = {
    "enter": "<Enter>",
    "return": "<Enter>",
    "tab": "<Tab>",
    "backspace": "<Backspace>",
    "delete": "<Delete>",
    "del": "<Delete>",
    "esc": "<Escape>",
    "escape": "<Escape>",
    "space": "<Space>",
    "up": "<ArrowUp>",
    "down": "<ArrowDown>",
    "left": "<ArrowLeft>",
    "right": "<ArrowRight>",
    "pageup": "<PageUp>",
    "pagedown": "<PageDown>",
    "home": "<Home>",
    "end": "<End>",
    "insert": "<Insert>",
    **{f"f{i}": f"<F{i}>" for i in range(1, 13)},
}
_MODIFIERS = {"alt": "A-", "ctrl": "C-", "win": "M-", "shift": "S-"}  # MiniWoB's order: A- C- M- S-
# Browser shortcuts that would close, navigate or reload the page out from under the task.
DENIED_CHORDS = frozenset(
    {
        "C-w",
        "C-q",
        "A-<F4>",
        "C-t",
        "C-n",
        "C-S-n",
        "C-S-w",
        "C-S-t",
        "A-<ArrowLeft>",
        "A-<ArrowRight>",
        "<F5>",
        "C-r",
        "C-S-r",
        "<F11>",
        "<F12>",
        "C-o",
        "C-s",
        "C-p",
        "C-u",
        "C-l",
        "C-S-i",
        "C-S-j",
    }
)


def task_names() -> list[str]:
    """All MiniWoB++ task names (`click-button`, ...) registered by the miniwob package."""
    try:
        import gymnasium as gym
        import miniwob
    except ImportError:
        raise ImportError(f"the miniwob env needs the miniwob package: {PIP_HINT}") from None

    gym.register_envs(miniwob)
    return sorted(k.split("/", 1)[1].rsplit("-v", 1)[0] for k in gym.registry if k.startswith("miniwob/"))


def miniwob_tasks(items: list[str], seeds: str) -> list[TaskRef]:
    """MiniWoB++ task names (checked against the installed miniwob package), each under `seeds` or its own
    `name@seed`, as `{"task": name, "seed": seed}` filed under `<name>/seed-<seed>`."""
    default = parse_seeds(seeds)
    known = set(task_names())
    specs = [item.partition("@") for item in items]
    unknown = [name for name, _, _ in specs if name not in known]
    if unknown:
        raise EnvUsageError(f"unknown MiniWoB task(s) {', '.join(unknown)}; e.g. {', '.join(sorted(known)[:8])}, ...")
    refs = []
    for name, _, seed in specs:
        for s in parse_seeds(seed) if seed else default:
            refs.append(TaskRef("miniwob", {"task": name, "seed": s}, name, f"seed-{s}"))
    return refs


class MiniWoBEnv:
    """One MiniWoB++ browser. `reset("click-button")` or `reset({"task": "click-button", "seed": 3})`.

    Observations are the 160x210 task area (times `screenshot_scale`); model coordinates in that screenshot are
    scaled back to the task area. Reward: 1.0 when the task reports success, else 0.0 (the raw, time-decayed
    MiniWoB reward is in `info["env_reward"]`). A browser that dies gives `infra_failure=True`, never a score.

    `time_limit_s`: MiniWoB's wall-clock limit per episode. None (the default) removes it: a model's latency or a
    loaded machine must not fail an episode. A number restores the original protocol (10 for most tasks); an
    episode that runs out then ends as a failure with `info["reason"] == "timed out"`.

    `observation`: one of OSWorld's four types. Beyond `screenshot`, each observation's `extra` holds the page's DOM
    elements (`elements`, boxes in screenshot pixels) and their table or marks as text (`elements_text`, trimmed to
    `observation_tokens`); `som` also numbers the marks on the screenshot.
    """

    def __init__(
        self,
        task: str | None = None,
        *,
        action_format: str | None = None,
        screenshot_scale: int = 1,
        wait_ms: float = 0.0,
        time_limit_s: float | None = None,
        observation: str = "screenshot",
        observation_tokens: int = DEFAULT_BUDGET,
    ):
        self.observation = check_observation(observation)
        _check_system()
        if time_limit_s is not None and not (isinstance(time_limit_s, int | float) and 0 < time_limit_s < 2e6):
            raise ValueError(f"time_limit_s must be None (no limit) or seconds in (0, 2e6), got {time_limit_s!r}")
        if not isinstance(screenshot_scale, int) or not 1 <= screenshot_scale <= 8:
            raise ValueError(f"screenshot_scale must be an integer 1..8, got {screenshot_scale!r}")
        self.action_format = action_format
        self.observation_tokens = int(observation_tokens)
        self.scale = screenshot_scale
        self.wait_ms = wait_ms
        self.time_limit_ms = NO_TIME_LIMIT_MS if time_limit_s is None else int(time_limit_s * 1000)
        self._gym_env = None
        self._keeper: tuple[int, str | None] | None = None  # its pid and mark, while a keeper runs the browser
        self._temporary: list[str] = []
        self._task: str | None = None
        self._cursor: tuple[float, float] | None = None
        self._last: Observation | None = None
        self._success = False
        self._done = False
        if task is not None:
            self._open(task)

    # -- GUIEnv -------------------------------------------------------------------------------------------------
    def reset(self, task: Any = None) -> Observation:
        """Start an episode of `task` (name or {"task", "seed"}); reuses the browser when the task is unchanged."""
        name, seed = _task_spec(task, self._task)
        if name != self._task or self._gym_env is None:
            self._open(name)
        try:
            obs, _info = self._gym_env.reset(seed=seed)
            armed = self._instance().driver.execute_script(_REARM_TIMER, self.time_limit_ms)
        except Exception as exc:  # selenium and urllib errors when the browser or driver is gone
            raise InfraFailure(f"MiniWoB reset failed: {type(exc).__name__}: {exc}") from exc
        if not armed:
            raise InfraFailure(f"MiniWoB reset of {name} left no episode running (the page ended it at once)")
        self._raise_if_died("reset")
        self._cursor, self._success, self._done = None, False, False
        self._last = self._observation(obs)
        return self._last

    def step(self, action: ParsedAction | str, *, format: str | None = None) -> StepResult:
        """Apply every action of one model output in order; an invalid output is not sent to the browser."""
        start = begin_step(self._last, self._done, action, format or self.action_format, self._translate_all)
        if isinstance(start, StepResult):
            return start
        parsed, miniwob_actions = start
        env_reward, info = 0.0, {}
        try:
            for m in miniwob_actions:
                obs, env_reward, done, _trunc, info = self._gym_env.step(m)
                self._raise_if_died("step")
                if done:
                    self._done = True
                    self._success = info.get("raw_reward", env_reward) > 0
                    break
                self._last = self._observation(obs)
        except InfraFailure as exc:
            return StepResult(self._last, 0.0, True, step_info(action_valid=True, infra_failure=True, error=str(exc)))
        except Exception as exc:
            err = f"MiniWoB step failed: {type(exc).__name__}: {exc}"
            return StepResult(self._last, 0.0, True, step_info(action_valid=True, infra_failure=True, error=err))
        done = self._done or parsed.terminal is not None
        reward = float(self._success) if done else 0.0
        extra = {"env_reward": env_reward, "reason": info.get("reason")} if info else {}
        return StepResult(self._last, reward, done, step_info(action_valid=True, **extra))

    def evaluate(self) -> float:
        """1.0 if the task reported success in this episode, else 0.0."""
        return float(self._success)

    def close(self) -> None:
        """Quit the browser and its driver (survivors of a failed quit are killed) and remove its profile."""
        if self._gym_env is not None:
            try:
                leftover = [] if self._keeper else self.pids()
            except Exception:
                leftover = []
            try:
                self._gym_env.close()
            except Exception:  # already dead: nothing left to release
                logger.debug("closing a dead MiniWoB env", exc_info=True)
            self._gym_env = None
            # the keeper's group and marked processes, looked up after the quit: no PID of a dead one is reused
            _kill_pids(_keeper_pids(*self._keeper) if self._keeper else leftover)
            self._keeper = None
        # ChromeDriver gives each browser a temporary profile (about 6.5 MB) and Chromium a socket directory beside
        # it; both are left behind at quit: one pair per browser start, thousands in a long run that switches tasks.
        for path in self._temporary:
            shutil.rmtree(path, ignore_errors=True)
        self._temporary = []

    # -- task keys, health and processes (used by EnvPool and the fault tests) -----------------------------------
    @staticmethod
    def task_key(task: Any) -> str | None:
        """The task page `task` needs: a browser opened on another one restarts to serve it."""
        return None if task is None else _task_spec(task, None)[0]

    @property
    def loaded_key(self) -> str | None:
        """The task page this env's browser has open (None before the first reset)."""
        return self._task if self._gym_env is not None else None

    def healthy(self) -> bool:
        """Whether the browser answers a trivial script."""
        instance = self._instance()
        if instance is None or instance.died:
            return False
        try:
            return instance.driver.execute_script("return 1;") == 1
        except Exception:
            return False

    def pids(self) -> list[int]:
        """PIDs of the keeper (first), chromedriver and every browser process; without a keeper, chromedriver's tree."""
        instance = self._instance()
        if instance is None:
            return []
        if self._keeper is not None:
            return _keeper_pids(*self._keeper)
        import psutil

        root = instance.driver.service.process.pid
        try:
            return [root] + [p.pid for p in psutil.Process(root).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    # -- internals ------------------------------------------------------------------------------------------------
    def _open(self, name: str) -> None:
        import gymnasium as gym
        import miniwob

        gym.register_envs(miniwob)
        env_id = f"miniwob/{name}-v1"
        if env_id not in gym.registry:
            raise EnvUsageError(f"unknown MiniWoB task {name!r}; valid tasks: {', '.join(task_names())}")
        self.close()
        try:
            self._gym_env = gym.make(env_id, wait_ms=self.wait_ms)
        except Exception as exc:
            raise InfraFailure(f"MiniWoB browser did not start: {type(exc).__name__}: {exc}") from exc
        self._task = name
        service = self._instance().driver.service
        if service.path == KEEPER:
            self._keeper = (service.process.pid, _keeper_mark(service.process.pid))
        self._temporary = _temporary_dirs(self.pids())
        instance = self._instance()
        self._area = (instance.task_width, instance.task_height)

    def _instance(self):
        return None if self._gym_env is None else self._gym_env.unwrapped.instance

    def _raise_if_died(self, what: str) -> None:
        instance = self._instance()
        if instance is None or instance.died:
            raise InfraFailure(f"MiniWoB browser died during {what}")

    def _observation(self, obs: dict) -> Observation:
        image = Image.fromarray(obs["screenshot"])
        if self.scale != 1:
            image = image.resize((image.width * self.scale, image.height * self.scale), Image.NEAREST)
        extra = {"task": self._task, "fields": list(obs.get("fields", ()))}
        if shows_elements(self.observation):
            elements = dom_elements(obs.get("dom_elements", ()), self._area, self.scale)
            image, read = with_elements(self.observation, image, elements, "dom", self.observation_tokens)
            extra.update(read)
        return Observation(image, obs["utterance"], extra)

    def _area_xy(self, x: int | None, y: int | None) -> tuple[float, float]:
        if x is None:
            return self._cursor or (self._area[0] / 2, self._area[1] / 2)
        return (x + 0.5) / self.scale, (y + 0.5) / self.scale

    def _translate_all(self, parsed: ParsedAction) -> list[dict]:
        """Every action of one model output -> MiniWoB actions, in order."""
        return [m for a in parsed.actions for m in self._translate(a)]

    def _translate(self, a: GUIAction) -> list[dict]:
        """One GUIAction -> MiniWoB actions; kinds MiniWoB cannot express raise ValueError (an invalid action)."""
        create = self._gym_env.unwrapped.create_action
        import numpy as np

        def at(kind: str, xy: tuple[float, float]) -> dict:
            self._cursor = xy
            return create(kind, coords=np.array(xy, dtype=np.float32))

        if a.kind in ("click", "double_click", "move"):
            kind = {"click": "CLICK_COORDS", "double_click": "DBLCLICK_COORDS", "move": "MOVE_COORDS"}[a.kind]
            return [at(kind, self._area_xy(a.x, a.y))]
        if a.kind == "triple_click":
            xy = self._area_xy(a.x, a.y)
            return [at("DBLCLICK_COORDS", xy), at("CLICK_COORDS", xy)]
        if a.kind == "drag":
            start, end = self._area_xy(a.x, a.y), self._area_xy(a.x2, a.y2)
            return [at("MOUSEDOWN_COORDS", start), at("MOVE_COORDS", end), at("MOUSEUP_COORDS", end)]
        if a.kind == "scroll":
            if a.dx:
                raise ValueError("MiniWoB has no horizontal scroll")
            xy = self._area_xy(a.x, a.y)
            kind = "SCROLL_UP_COORDS" if a.dy > 0 else "SCROLL_DOWN_COORDS"
            return [at(kind, xy) for _ in range(min(abs(a.dy), MAX_SCROLL_REPEAT))]
        if a.kind == "type":
            out = []
            for i, line in enumerate(a.text.split("\n")):
                if i:
                    out.append(self._key(["enter"]))
                out.extend(create("TYPE_TEXT", text=line[j : j + TYPE_CHUNK]) for j in range(0, len(line), TYPE_CHUNK))
            return out
        if a.kind == "key":
            return [self._key(a.keys)]
        if a.kind in ("wait", "done", "fail"):
            return [create("NONE")] if a.kind == "wait" else []
        if a.kind == "api":
            raise ValueError(f"MiniWoB has no app APIs ({a.api} is a desktop app's); Agent's GUI primitives work here")
        raise ValueError(f"MiniWoB cannot do {a.kind} (no right or middle button in the task page)")

    def _key(self, keys: list[str]) -> dict:
        *mods, key = keys
        if any(m not in _MODIFIERS for m in mods):
            raise ValueError(f"MiniWoB key chords take ctrl/shift/alt/win modifiers, got {'+'.join(keys)}")
        name = _WEBDRIVER_KEYS.get(key, key if len(key) == 1 and key.isascii() else None)
        if name is None:
            raise ValueError(f"MiniWoB cannot press {key!r}")
        combo = "".join(p for m, p in _MODIFIERS.items() if m in mods) + name
        if combo in DENIED_CHORDS:
            raise ValueError(f"key {'+'.join(keys)} would close or navigate the task page")
        config = self._gym_env.unwrapped.action_space_config
        index = _key_index(config)
        if combo not in index:
            raise ValueError(f"MiniWoB cannot press {'+'.join(keys)}")
        return self._gym_env.unwrapped.create_action("PRESS_KEY", key=index[combo])


def _key_index(config) -> dict[str, int]:
    """Map key combos to indices, widening the config to every combination MiniWoB can send (once per config)."""
    cached = getattr(config, "_verl_cua_key_index", None)
    if cached is None:
        from miniwob.constants import ALL_POSSIBLE_KEYS

        config.allowed_keys = ALL_POSSIBLE_KEYS
        cached = {k: i for i, k in enumerate(ALL_POSSIBLE_KEYS)}
        config._verl_cua_key_index = cached
    return cached


def _kill_pids(pids: list[int]) -> None:
    """SIGKILL whatever of `pids` still runs (chromium orphaned by a driver that died first)."""
    import psutil

    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
        except psutil.Error:
            pass


def _keeper_mark(keeper: int) -> str | None:
    """The mark the keeper `keeper` gave its processes (None once it is gone)."""
    try:
        with open(f"/proc/{keeper}/environ", "rb") as f:
            environ = f.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{KEEPER_MARK}={keeper}:".encode()
    return next((item.decode().split("=", 1)[1] for item in environ if item.startswith(prefix)), None)


def _keeper_pids(keeper: int, mark: str | None) -> list[int]:
    """The keeper's process group (keeper first) and its marked processes that left it (Chromium's crash handlers)."""
    import psutil

    needle = f"{KEEPER_MARK}={mark}".encode() if mark else None
    found = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == keeper:
                found.append(pid)
            elif needle is not None:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(pid)
        except OSError:  # gone, or another user's
            continue
    return sorted(found, key=lambda pid: pid != keeper)


def _temporary_dirs(pids: list[int]) -> list[str]:
    """The temporary `--user-data-dir` these browser processes use and the socket directory it links to."""
    import psutil

    temp = os.path.realpath(tempfile.gettempdir())
    found = set()
    for pid in pids:
        try:
            cmdline = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        for arg in cmdline:
            if arg.startswith("--user-data-dir="):
                found.add(os.path.realpath(arg.split("=", 1)[1]))
    for profile in list(found):  # Chromium's singleton socket lives in a directory of its own beside the profile
        found.add(os.path.dirname(os.path.realpath(os.path.join(profile, "SingletonSocket"))))
    return sorted(path for path in found if os.path.dirname(path) == temp)


def _task_spec(task: Any, current: str | None) -> tuple[str, int | None]:
    if task is None:
        if current is None:
            raise EnvUsageError("reset() needs a task name the first time, e.g. reset('click-button')")
        return current, None
    if isinstance(task, str):
        return task, None
    if isinstance(task, dict) and isinstance(task.get("task"), str):
        return task["task"], task.get("seed")
    raise EnvUsageError(f"MiniWoB task must be a name or {{'task': name, 'seed': int}}, got {task!r:.80}")


def _check_system() -> None:
    """Missing packages fail with one line naming the install command."""
    try:
        import miniwob  # noqa: F401
    except ImportError:
        raise ImportError(f"the miniwob env needs the miniwob package: {PIP_HINT}") from None
    binary = os.environ.setdefault("MINIWOB_CHROME_BINARY", CHROME_BINARY)
    driver = os.environ.setdefault("MINIWOB_CHROMEDRIVER", KEEPER)
    if driver == KEEPER:
        driver = os.environ.setdefault(REAL_CHROMEDRIVER, CHROMEDRIVER)
        if not os.access(KEEPER, os.X_OK):
            raise RuntimeError(f"the browser keeper {KEEPER} is not executable: reinstall verl-cua or chmod +x it")
        if not shutil.which("setsid"):
            raise RuntimeError("the browser keeper needs setsid: apt-get install -y util-linux")
    for path in (binary, driver):
        if not (os.path.isfile(path) or shutil.which(path)):
            raise RuntimeError(f"MiniWoB needs Chromium and ChromeDriver ({path} is missing): {APT_HINT}")
