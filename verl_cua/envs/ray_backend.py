"""Ray backend for `EnvPool`: each env lives in a Ray actor, pinned to a desktop host by a custom resource.

Start each desktop host with `ray start --resources='{"verl_cua_desktop:<host>": <max envs>}'` and pass
`EnvPool(factory, size, backend="ray", hosts=[...])`; slots are spread round-robin over the hosts. Ray is
imported lazily, here only: the env layer itself never needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RESOURCE_PREFIX = "verl_cua_desktop:"


class _EnvActor:
    """Runs in the Ray worker: builds the env there and forwards calls to it."""

    def __init__(self, factory: Callable[[], Any]):
        self.env = factory()

    def call(self, method: str, *args, **kwargs):
        return getattr(self.env, method)(*args, **kwargs)

    def has(self, method: str) -> bool:
        return hasattr(self.env, method)

    def apply(self, fn: Callable[[Any], Any]):
        return fn(self.env)

    def kill_processes(self) -> None:
        """Kill the env's own processes (browsers, desktops) on its host, then let it release what they left (its
        temporary profiles and runtime dirs) before the actor goes."""
        from verl_cua.envs.calls import kill_env

        kill_env(self.env)
        try:
            self.env.close()
        except Exception:  # the processes are dead already; a close that fails leaves files at worst
            pass


class RayEnv:
    """A `GUIEnv` whose env lives in a Ray actor; `kill()` ends the env's processes and the actor."""

    def __init__(self, actor):
        self._actor = actor

    def _get(self, method: str, *args, **kwargs):
        import ray

        return ray.get(self._actor.call.remote(method, *args, **kwargs))

    def apply(self, fn: Callable[[Any], Any]):
        """Run `fn(env)` where the env lives (inspection, scripted solutions) and return its result."""
        import ray

        return ray.get(self._actor.apply.remote(fn))

    def pids(self) -> list[int]:
        """PIDs of the remote env's processes, on its host."""
        return self._get("pids") if self.apply(lambda env: hasattr(env, "pids")) else []

    def reset(self, task: Any):
        """Reset the remote env."""
        return self._get("reset", task)

    def step(self, action, *, format: str | None = None):
        """Step the remote env."""
        return self._get("step", action, format=format)

    def evaluate(self) -> float:
        """Score the remote env's episode."""
        return self._get("evaluate")

    def healthy(self) -> bool:
        """The remote env's own health check (True if it has none)."""
        import ray

        if not ray.get(self._actor.has.remote("healthy")):
            return True
        return self._get("healthy")

    def close(self) -> None:
        """Close the remote env, then end the actor."""
        import ray

        try:
            self._get("close")
        finally:
            ray.kill(self._actor)

    def kill(self) -> None:
        """Kill the env's processes on its host (bounded wait), then the actor."""
        import ray

        try:
            ray.get(self._actor.kill_processes.remote(), timeout=10)
        except Exception:  # the actor itself may be gone or stuck: killing it below is what matters
            pass
        ray.kill(self._actor)


def ray_factory(
    factory: Callable[[], Any], slot: int, hosts: list[str] | None, num_cpus: float, start_timeout: float | None
) -> Callable[[], Any]:
    """A factory that places `factory()` in a Ray actor on `hosts[slot % len(hosts)]` (any node if no hosts)."""
    try:
        import ray
    except ImportError:
        raise ImportError("the ray pool backend needs ray: pip install 'ray>=2.41' (or 'verl-cua[verl]')") from None

    def build() -> RayEnv:
        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True)
        options: dict[str, Any] = {"num_cpus": num_cpus, "max_concurrency": 1}
        if hosts:
            options["resources"] = {RESOURCE_PREFIX + hosts[slot % len(hosts)]: 1}
        actor = ray.remote(_EnvActor).options(**options).remote(factory)
        try:  # placed and built, or given up: an actor that cannot be placed must not linger
            ray.get(actor.has.remote("reset"), timeout=start_timeout)
        except BaseException:
            ray.kill(actor)
            raise
        return RayEnv(actor)

    return build
