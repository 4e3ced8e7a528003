"""One `EnvPool` per agent-loop worker process, shared by every episode that process runs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from verl_cua.envs import EnvPool, env_start_timeout, make_env, observed_kwargs
from verl_cua.envs.observation import DEFAULT_BUDGET

_LOCK = threading.Lock()
START_TIMEOUT = 120.0  # seconds per env start, unless the env asks for more
_SERVICES: dict[str, EnvService] = {}


class EnvService:
    """A pool of envs plus the threads that drive them; episodes wait on a semaphore, never on a blocked thread."""

    def __init__(self, env_cfg: Mapping[str, Any]):
        name, kwargs = env_cfg["name"], dict(env_cfg.get("kwargs") or {})
        observation = env_cfg.get("observation", "screenshot")
        kwargs = observed_kwargs(name, kwargs, observation, env_cfg.get("observation_tokens", DEFAULT_BUDGET))
        self.size = int(env_cfg["pool_size"])
        own_start = env_start_timeout(name, kwargs, self.size, None)  # docker: lock waits + boot
        self.pool = EnvPool(
            lambda: make_env(name, **kwargs),
            self.size,
            # an env that says how long its start takes resets the same way (docker: a new container)
            reset_timeout=max(float(env_cfg["reset_timeout"]), own_start or 0.0),
            step_timeout=float(env_cfg["step_timeout"]),
            evaluate_timeout=float(env_cfg["evaluate_timeout"]),
            start_timeout=START_TIMEOUT if own_start is None else own_start,
            keep_idle=int(env_cfg.get("idle_envs", 0)),
        )
        self._executor = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="verl-cua-env")
        self._semaphores: dict[int, asyncio.Semaphore] = {}

    def slot(self) -> asyncio.Semaphore:
        """The semaphore of the running event loop that admits `size` episodes at a time."""
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._semaphores:
            self._semaphores[loop_id] = asyncio.Semaphore(self.size)
        return self._semaphores[loop_id]

    async def call(self, fn, *args, **kwargs):
        """Run a blocking env call on the pool's own threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))


def env_service(env_cfg: Mapping[str, Any]) -> EnvService:
    """The process-wide service for this env config (built on first use)."""
    key = repr(sorted((k, repr(v)) for k, v in env_cfg.items()))
    with _LOCK:
        if key not in _SERVICES:
            _SERVICES[key] = EnvService(env_cfg)
        return _SERVICES[key]


def close_all() -> None:
    """Close every pool of this process (tests, shutdown)."""
    with _LOCK:
        services = list(_SERVICES.values())
        _SERVICES.clear()
    for service in services:
        service.pool.close()
