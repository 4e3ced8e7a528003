"""A bound on Ray's silent waits. verl asks Ray for placement groups (GPU bundles) and actors (workers,
TransferQueue's storage units, the agent loop's workers) and waits for them in a `ray.get` without a timeout: on
a cluster that lacks what is asked, a run waits forever and prints nothing. `ResourceWatchdog` watches the
cluster's pending demands from the driver and, once a placement group or an actor has waited for resources longer
than `cua.preflight.resource_timeout`, stops the run with one line naming what was asked and what the cluster has."""

from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

SETTING = "cua.preflight.resource_timeout"
HINTS = {
    "GPU": "ask for fewer (trainer.nnodes x trainer.n_gpus_per_node; NNODES, N_GPUS_PER_NODE in the recipes) or add "
    "GPU nodes",
    "CPU": "declare more Ray CPU slots (ray_kwargs.ray_init.num_cpus=32; slots are scheduling tokens, not cores) or "
    "add nodes",
}

DEFAULT_RESOURCE_TIMEOUT = 300.0  # seconds; `cua.preflight.resource_timeout`'s default in both hosts


class ResourceWaitError(RuntimeError):
    """Ray waited longer than the bound for resources the cluster lacks; the message names them."""


@dataclass(frozen=True)
class Waiting:
    """One thing Ray cannot place yet: a placement group or the actors behind a pending demand."""

    key: str
    what: str
    bundles: tuple[tuple[dict[str, float], int], ...]  # (resource shape, how many of it)


class ResourceWatchdog:
    """Context manager around the code that starts Ray and waits on it (verl's `run_ppo`): if a wait outlives
    `timeout` seconds, the main thread is interrupted and `ResourceWaitError` leaves the `with` block instead.
    Only this job's placement groups and actors count (a shared cluster's other jobs are not ours to judge)."""

    def __init__(self, timeout: float, poll: float | None = None, grace: float = 60.0):
        self.timeout = float(timeout)
        self.poll = poll if poll is not None else max(0.5, min(5.0, self.timeout / 5))
        self.grace = grace  # after the interrupt: how long the main thread may take to leave before the process ends
        self.message: str | None = None
        self._since: dict[str, float] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the watchdog never interrupts a main thread that has left the block
        self._thread: threading.Thread | None = None
        self._failed = False
        self._sigint: Any = None

    def __enter__(self) -> ResourceWatchdog:
        if self.timeout <= 0:
            return self
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) in (
            signal.SIG_IGN,
            signal.SIG_DFL,
        ):  # a job started in the background by a shell ignores SIGINT, and then the interrupt would do nothing
            self._sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
        self._thread = threading.Thread(target=self._watch, name="verl-cua-resource-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            with self._lock:
                self._stop.set()
        except KeyboardInterrupt:  # delivered while this waited for the lock
            self._stop.set()
            kind = KeyboardInterrupt
        if self._sigint is not None:
            signal.signal(signal.SIGINT, self._sigint)
        if self.message and kind is not None:  # the interrupt (or what it broke) ends the block: say why, once
            raise ResourceWaitError(self.message) from None

    def _watch(self) -> None:
        import ray

        while not self._stop.wait(self.poll):
            if not ray.is_initialized():
                continue
            try:
                message = self.check(time.monotonic())
            except Exception as exc:  # a Ray without this API, or a cluster going down: never fail the run for it
                if not self._failed:
                    logger.warning("cannot read Ray's pending resources (%s: %s); waits are not bounded while this "
                                   "lasts", type(exc).__name__, exc)  # fmt: skip
                self._failed = True
                continue
            self._failed = False
            if message:
                self._fire(message)
                return

    def _fire(self, message: str) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            self.message = message
            logger.error("%s", message)
            _thread.interrupt_main()
        if not self._stop.wait(self.grace):  # something swallowed the interrupt: never wait silently
            print(f"verl-cua: {message}", file=sys.stderr, flush=True)
            os._exit(1)

    def check(self, now: float) -> str | None:
        """The message once something has waited past the bound, else None (and the waits so far are noted)."""
        waiting, total, free = pending()
        self._since = {w.key: self._since.get(w.key, now) for w in waiting}  # a wait that ended starts anew
        late = [w for w in waiting if now - self._since[w.key] >= self.timeout]
        if not late:
            return None
        return describe(late, total, free, self.timeout)


def pending() -> tuple[list[Waiting], dict[str, float], dict[str, float]]:
    """This job's waits for resources, and the cluster's total and free resources: its placement groups still
    pending (the autoscaler's demand), and its actors not yet placed (no worker process) whose resources exceed
    what is free (GCS's actor table). A queue of tasks waiting its turn is not a stall, so task demand does not
    count; nor does an actor whose constructor is running (it has its resources)."""
    import ray
    from ray.autoscaler.v2.sdk import get_cluster_status

    job = ray.get_runtime_context().get_job_id()  # hex; placement group and actor ids end with it
    status = get_cluster_status(ray.get_runtime_context().gcs_address)
    total, free = _plain(status.total_resources()), _plain(status.available_resources())
    demands = status.resource_demands.placement_group_demand
    names = _placement_group_names() if demands else {}
    waiting = [
        Waiting(
            key=f"pg:{demand.pg_id}",
            what=f"placement group {names.get(demand.pg_id) or demand.pg_id} ({demand.strategy})",
            bundles=tuple((dict(b.bundle), int(b.count)) for b in demand.bundles_by_count),
        )
        for demand in demands
        if str(demand.pg_id).endswith(job)
    ]
    for actor_id, name, needs in _pending_actors(job):
        if any(amount > free.get(resource, 0.0) for resource, amount in _plain(needs).items()):
            waiting.append(Waiting(key=f"actor:{actor_id}", what=f"actor {name}", bundles=((needs, 1),)))
    return waiting, total, free


def describe(late: list[Waiting], total: dict[str, float], free: dict[str, float], timeout: float) -> str:
    """One line: what waited, what it asks, what the cluster has, the fix, and the setting that bounds the wait."""
    asked: dict[str, float] = {}
    for item in late:
        for bundle, count in item.bundles:
            for resource, amount in _plain(bundle).items():
                asked[resource] = asked.get(resource, 0.0) + amount * count
    short = sorted(r for r, amount in asked.items() if amount > free.get(r, 0.0))
    groups = [w for w in late if w.key.startswith("pg:")][:3]
    actors = Counter(w.what.removeprefix("actor ") for w in late if w.key.startswith("actor:"))
    parts = [f"{w.what} asks {_bundles(w.bundles)}" for w in groups]
    for name, count in sorted(actors.items()):
        bundles = next(w.bundles for w in late if w.what == f"actor {name}")
        shape = _shape(bundles[0][0])
        parts.append(f"{count} actors {name} ask {shape} each" if count > 1 else f"actor {name} asks {shape}")
    has = ", ".join(f"{r} {total.get(r, 0.0):g} ({free.get(r, 0.0):g} free)" for r in short or sorted(total)[:2])
    hints = "; ".join(HINTS.get(r, f"add nodes with {r}") for r in short)
    return (
        f"Ray has waited {timeout:g} s for resources the cluster lacks: {'; '.join(parts)}; the cluster has {has}"
        + (f": {hints}" if hints else "")
        + f" ({SETTING}={timeout:g} bounds this wait; 0: none)"
    )


def _bundles(bundles: tuple[tuple[dict[str, float], int], ...]) -> str:
    return " + ".join(f"{count} x {_shape(bundle)}" for bundle, count in bundles)


def _shape(bundle: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(bundle.items())) + "}"


def _plain(resources: dict[str, float]) -> dict[str, float]:
    """Scheduling resources only (no per-node labels, memory or object store)."""
    skip = ("node:", "memory", "object_store_memory", "accelerator_type:")
    return {k: float(v) for k, v in resources.items() if not k.startswith(skip) and "_group_" not in k}


def _placement_group_names() -> dict[str, str]:
    from ray.util.placement_group import placement_group_table

    return {pg_id: info.get("name") or "" for pg_id, info in placement_group_table().items()}


def _pending_actors(job: str) -> list[tuple[str, str, dict[str, float]]]:
    """(id, class name, resources asked) of this job's actors that Ray has not given a worker process yet."""
    from ray._private import state
    from ray.core.generated import gcs_pb2

    table = state.state._connect_and_get_accessor().get_actor_table(None, "PENDING_CREATION")
    actors = [gcs_pb2.ActorTableData.FromString(raw) for raw in table]
    return [(a.actor_id.hex(), a.class_name or "?", {k: float(v) for k, v in a.required_resources.items()})
            for a in actors if a.job_id.hex() == job and not a.pid and not a.address.worker_id]  # fmt: skip
