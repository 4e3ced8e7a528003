"""`EnvPool`: N desktops leased one episode at a time, with health checks, per-call timeouts and restarts.

Threads on one host: every env call waits on a browser or a desktop server (I/O), so threads overlap them
without the start-up and memory cost of processes. A call that fails or times out is an infra failure: the
lease answers `infra_failure=True` instead of raising, the env's processes are killed, and the slot is rebuilt
for the next episode. An env whose start finishes after `start_timeout` gave up on it is closed when it arrives.

Envs that load a task at a cost (a MiniWoB++ browser opens one task page) say so with `task_key(task)` and
`loaded_key`; `acquire(task=...)` then leases a free env already loaded for that task, and an env it must switch
is parked (kept idle, up to `keep_idle` of them, least recently used closed first) in exchange for a parked one
loaded for the task, so a batch mixing tasks restarts no browser once each task has its envs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from PIL import Image

from verl_cua.actions import ParsedAction
from verl_cua.envs.base import EnvUsageError, GUIEnv, Observation, StepResult, TaskUnscorable, step_info
from verl_cua.envs.calls import CallTimeout, call_with_timeout, kill_env

logger = logging.getLogger(__name__)
T = TypeVar("T")

BLANK = (64, 64)
BACKENDS = ("thread", "ray")


class _Slot:
    """One env position in the pool: the env (None until built or after it broke) and its counters."""

    def __init__(self, index: int):
        self.index = index
        self.env: GUIEnv | None = None
        self.restarts = 0
        self.start_error: str | None = None


class EnvLease:
    """An env leased for one episode. Its calls never raise for infra reasons: they report `infra_failure`."""

    def __init__(self, pool: EnvPool, slot: _Slot):
        self._pool = pool
        self._slot = slot
        self.infra_failure = False
        self.desktop_broken = False  # the agent broke its env this episode (a failure scored 0, never masked)
        self.keep_env = False  # masked, but nothing broke the env (TaskUnscorable): released without a rebuild
        self.error: str | None = None
        self._last: Observation | None = None
        self._released = False

    @property
    def env(self) -> GUIEnv | None:
        """The env itself (None if it could not be built)."""
        self._check_held()
        return self._slot.env

    def _check_held(self) -> None:
        if self._released:
            raise EnvUsageError("this lease was released; acquire() a new one")

    def reset(self, task: Any) -> Observation:
        """Reset to `task`; on infra failure a blank observation with `extra["infra_failure"] = True`."""
        self._check_held()
        self.infra_failure, self.desktop_broken, self.keep_env, self.error = False, False, False, None
        env = self._slot.env
        if env is None:  # the start failure was counted when it happened
            self.infra_failure, self.error = True, f"env could not be started: {self._slot.start_error}"
            return self._fail_obs(self.error, task)
        try:
            self._last = call_with_timeout(lambda: env.reset(task), self._pool.reset_timeout)
            return self._last
        except EnvUsageError:
            raise
        except TaskUnscorable as exc:
            self._mark_unscorable(exc)
            return self._fail_obs(self.error, task)
        except Exception as exc:
            return self._fail_obs(_describe(exc, "reset"), task)

    def step(self, action: ParsedAction | str, *, format: str | None = None) -> StepResult:
        """Step the env; an infra failure ends the episode with `info["infra_failure"] = True`."""
        self._check_held()
        env = self._slot.env
        if self.infra_failure or env is None:
            return self._fail_step(self.error or "env is not available")
        try:
            result = call_with_timeout(lambda: env.step(action, format=format), self._pool.step_timeout)
        except EnvUsageError:
            raise  # a bug in the caller (no format, step before reset): not the desktop's fault
        except Exception as exc:
            return self._fail_step(_describe(exc, "step"))
        if result.info.get("infra_failure"):
            self._mark_broken(result.info.get("error") or "infra failure")
        if result.info.get("desktop_broken"):
            self._agent_broke_env()
        self._last = result.observation
        return result

    def evaluate(self) -> float:
        """The env's score; 0.0 with `infra_failure` set when the env broke (callers must check the flag)."""
        self._check_held()
        env = self._slot.env
        if self.infra_failure or env is None:
            return 0.0
        try:
            score = float(call_with_timeout(env.evaluate, self._pool.evaluate_timeout))
        except TaskUnscorable as exc:
            self._mark_unscorable(exc)
            return 0.0
        except Exception as exc:
            self._mark_broken(_describe(exc, "evaluate"))
            return 0.0
        if _desktop_broken(env):
            self._agent_broke_env()
        return score

    def release(self) -> None:
        """Give the env back to the pool (rebuilt first if it broke)."""
        self._pool._release(self)

    def __enter__(self) -> EnvLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _agent_broke_env(self) -> None:
        if not self.desktop_broken:
            self.desktop_broken = True
            self._pool._count_desktop_broken()

    def _mark_broken(self, error: str) -> None:
        self.infra_failure, self.error = True, error
        self._pool._count_infra(self._slot, error)

    def _mark_unscorable(self, exc: TaskUnscorable) -> None:
        """The episode is masked as an infra failure under a named error; the desktop, which nothing broke, stays."""
        self.infra_failure, self.keep_env, self.error = True, True, f"unscorable: {exc}"
        self._pool._count_unscorable(self._slot, self.error)

    def _fail_obs(self, error: str, task: Any) -> Observation:
        if not self.infra_failure:
            self._mark_broken(error)
        image = self._last.screenshot if self._last is not None else Image.new("RGB", BLANK)
        return Observation(image, "", {"infra_failure": True, "error": error, "task": task})

    def _fail_step(self, error: str) -> StepResult:
        if not self.infra_failure:
            self._mark_broken(error)
        obs = self._last or Observation(Image.new("RGB", BLANK), "", {})
        return StepResult(obs, 0.0, True, step_info(action_valid=True, infra_failure=True, error=error))


class EnvPool:
    """`size` envs built by `factory()`, leased with `acquire()` / `lease.release()` or `with pool.acquire()`.

    Health is checked (`env.healthy()`, when the env has it) before each lease; a broken env is killed by PID
    (`env.pids()`, when it has them) and rebuilt. `map(fn, items)` runs `fn(lease, item)` over items on all envs.
    `backend="ray"` builds each env in a Ray actor instead, on `hosts` (custom resource
    `verl_cua_desktop:<host>`, see `verl_cua.envs.ray_backend`), for fleets larger than one machine.
    `keep_idle`: envs parked beside the `size` leased ones for tasks not running now (default 0: a task switch
    restarts the env; each parked MiniWoB++ browser holds ~0.4 GB).
    """

    def __init__(
        self,
        factory: Callable[[], GUIEnv],
        size: int,
        *,
        reset_timeout: float | None = 120.0,
        step_timeout: float | None = 60.0,
        evaluate_timeout: float | None = 120.0,
        start_timeout: float | None = 120.0,
        start_retries: int = 2,
        backend: str = "thread",
        hosts: list[str] | None = None,
        ray_num_cpus: float = 0.0,
        keep_idle: int = 0,
    ):
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"pool size must be a positive integer, got {size!r}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown pool backend {backend!r}; valid backends: {', '.join(BACKENDS)}")
        self.backend, self.hosts, self.ray_num_cpus = backend, hosts, ray_num_cpus
        self.factory = factory
        self.size = size
        self.reset_timeout, self.step_timeout, self.evaluate_timeout = reset_timeout, step_timeout, evaluate_timeout
        self.start_timeout, self.start_retries = start_timeout, start_retries
        self._slots = [_Slot(i) for i in range(size)]
        self._free = list(self._slots)
        self.keep_idle = int(keep_idle)
        self._idle: list[tuple[Any, GUIEnv]] = []  # parked envs and their loaded keys, least recently used first
        self.switches = 0  # leases whose env had to change task (a parked env taken or a fresh one built)
        self._cond = threading.Condition()
        self._closed = False
        self.infra_failures = 0
        self.desktop_broken = 0  # episodes whose agent broke its env (failures, not infra failures)
        self.unscorable = 0  # episodes masked because this install cannot score their task (desktop kept)
        self.last_errors: list[str] = []

    # -- leasing ---------------------------------------------------------------------------------------------------
    def acquire(self, timeout: float | None = None, task: Any = None) -> EnvLease:
        """Lease a healthy env (building or rebuilding it if needed); waits for a free slot up to `timeout`.
        With `task`, an env already loaded for it is preferred, and one loaded for another task is parked for a
        parked env of this task (see the module docstring)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._free or self._closed, timeout):
                raise TimeoutError(f"no free env in the pool of {self.size} after {timeout}s")
            if self._closed:
                raise RuntimeError("the env pool is closed")
            slot = self._free.pop(self._pick(task))
        if task is not None:
            self._load_for(slot, task)
        self._ensure_healthy(slot)  # one check, of the env the lease gets
        if self._closed:  # closed meanwhile: what this lease built or took is nobody's to close
            self._discard(slot, count=False)
            raise RuntimeError("the env pool is closed")
        return EnvLease(self, slot)

    def _pick(self, task: Any) -> int:
        """Index in `_free` of the slot to lease (callers hold _cond): one loaded for `task`, else one with nothing
        loaded (empty or fresh), else the first."""
        if task is None:
            return 0
        loaded = [_loaded_key(slot.env) for slot in self._free]
        for i, slot in enumerate(self._free):
            key = _task_key(slot.env, task)
            if key is not None and loaded[i] == key:
                return i
        return next((i for i, key in enumerate(loaded) if key is None), 0)

    def _load_for(self, slot: _Slot, task: Any) -> None:
        """Give `slot` an env loaded for `task` if its own is loaded for another: a parked one, else none (the caller
        then builds a fresh one)."""
        env = slot.env
        key = _task_key(env, task)
        loaded = _loaded_key(env)
        if key is None or loaded is None or loaded == key:
            return
        with self._cond:
            if self._closed:
                raise RuntimeError("the env pool is closed")
            self.switches += 1
            found = next((i for i, (k, _) in enumerate(self._idle) if k == key), None)
            parked = self._idle.pop(found)[1] if found is not None else None
            self._idle.append((loaded, env))
            evicted = self._idle[: max(0, len(self._idle) - self.keep_idle)]
            del self._idle[: len(evicted)]
        for _, old in evicted:
            _retire(old)
        slot.env = parked  # checked (or, when None, built) by the caller

    def _release(self, lease: EnvLease) -> None:
        if lease._released:
            return  # releasing twice must not free the slot twice
        lease._released = True
        slot = lease._slot
        if lease.infra_failure and not lease.keep_env and slot.env is not None:
            self._discard(slot)
        with self._cond:
            self._free.append(slot)
            self._cond.notify()

    def map(self, fn: Callable[[EnvLease, Any], T], items: Iterable[Any]) -> list[T]:
        """Run `fn(lease, item)` for every item, `size` at a time, each on its own leased env; results in order."""

        def run(item: Any) -> T:
            with self.acquire() as lease:
                return fn(lease, item)

        with ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="verl-cua-pool") as ex:
            return list(ex.map(run, items))

    def warm(self) -> None:
        """Build every env now, in parallel, instead of on first lease."""
        with ThreadPoolExecutor(max_workers=self.size) as ex:
            list(ex.map(self._ensure_healthy, self._slots))

    def stats(self) -> dict[str, Any]:
        """Counters for metrics: infra failures, restarts, envs alive."""
        return {
            "size": self.size,
            "alive": sum(s.env is not None for s in self._slots),
            "parked": len(self._idle),
            "switches": self.switches,
            "restarts": sum(s.restarts for s in self._slots),
            "infra_failures": self.infra_failures,
            "desktop_broken": self.desktop_broken,
            "unscorable": self.unscorable,
        }

    def close(self) -> None:
        """Close every env in parallel (a docker desktop stops in ~13 s), killing its processes if closing hangs."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            idle, self._idle = self._idle, []
        # closed before anything is killed: a MiniWoB browser killed first answers selenium's quit with a reset
        envs = [env for _, env in idle]
        for slot in self._slots:
            env, slot.env = slot.env, None
            envs += [env] if env is not None else []
        closes = [lambda env=env: _retire(env) for env in envs]
        if closes:
            with ThreadPoolExecutor(max_workers=len(closes), thread_name_prefix="verl-cua-close") as ex:
                list(ex.map(lambda close: close(), closes))

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- health and rebuilds --------------------------------------------------------------------------------------
    def _ensure_healthy(self, slot: _Slot) -> None:
        if slot.env is not None and not self._healthy(slot.env):
            logger.warning("env %d failed its health check; rebuilding", slot.index)
            self._discard(slot)
        for attempt in range(self.start_retries + 1):
            if slot.env is not None:
                return
            try:
                slot.env = call_with_timeout(self._factory_for(slot), self.start_timeout, on_late=_close_late)
                slot.start_error = None
                if slot.restarts or attempt:
                    logger.info("env %d rebuilt", slot.index)
            except Exception as exc:
                slot.start_error = _describe(exc, "start")
                self._count_infra(slot, slot.start_error)
                if attempt < self.start_retries:
                    time.sleep(min(2.0 * (attempt + 1), 10.0))

    def _factory_for(self, slot: _Slot) -> Callable[[], GUIEnv]:
        if self.backend == "thread":
            return self.factory
        from verl_cua.envs.ray_backend import ray_factory

        timeout = None if self.start_timeout is None else self.start_timeout * 0.9
        return ray_factory(self.factory, slot.index, self.hosts, self.ray_num_cpus, timeout)

    @staticmethod
    def _healthy(env: GUIEnv) -> bool:
        check = getattr(env, "healthy", None)
        if check is None:
            return True
        try:
            return bool(call_with_timeout(check, 10.0))
        except Exception:
            return False

    def _discard(self, slot: _Slot, *, count: bool = True) -> None:
        env, slot.env = slot.env, None
        if env is None:
            return
        if count:
            slot.restarts += 1
        _close(env)

    def _count_desktop_broken(self) -> None:
        with self._cond:
            self.desktop_broken += 1

    def _count_unscorable(self, slot: _Slot, error: str) -> None:
        with self._cond:
            self.unscorable += 1
            self.last_errors = (self.last_errors + [f"env {slot.index}: {error}"])[-20:]
        logger.warning("episode on env %d masked, desktop kept: %s", slot.index, error)

    def _count_infra(self, slot: _Slot, error: str) -> None:
        with self._cond:
            self.infra_failures += 1
            self.last_errors = (self.last_errors + [f"env {slot.index}: {error}"])[-20:]
        logger.warning("infra failure on env %d: %s", slot.index, error)


def _desktop_broken(env: GUIEnv) -> bool:
    """Whether the env says its agent broke it this episode (`desktop_broken`; envs without it never do)."""
    if hasattr(env, "apply"):  # a Ray actor's env
        return bool(env.apply(_broken_attr))
    return _broken_attr(env)


def _broken_attr(env: GUIEnv) -> bool:
    return bool(getattr(env, "desktop_broken", False))


def _task_key(env: GUIEnv | None, task: Any) -> Any:
    """What an env must have loaded to serve `task` without a restart (None: any env serves any task alike)."""
    key = getattr(env, "task_key", None)
    return None if key is None else key(task)


def _loaded_key(env: GUIEnv | None) -> Any:
    """The task key an env has loaded now (None: nothing loaded yet, or the env does not say)."""
    return getattr(env, "loaded_key", None)


def _close(env: GUIEnv) -> None:
    """Kill a broken env's processes, then close it (a close that hangs is given up after 15 s)."""
    kill_env(env)
    try:
        call_with_timeout(env.close, 15.0)
    except Exception:
        logger.debug("closing a broken env failed", exc_info=True)


def _close_late(env: GUIEnv) -> None:
    """Close an env whose start finished after the pool gave up on it (its slot was rebuilt or failed meanwhile)."""
    logger.warning("an env finished starting after its start timeout; closing it")
    _retire(env)


def _retire(env: GUIEnv) -> None:
    """Close a healthy env no longer needed; its processes are killed only if closing fails or hangs."""
    try:
        call_with_timeout(env.close, 15.0)
    except Exception:
        logger.debug("closing a parked env failed; killing it", exc_info=True)
        kill_env(env)


def _describe(exc: BaseException, what: str) -> str:
    if isinstance(exc, CallTimeout):
        return f"{what} timed out ({exc})"
    return f"{what} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
