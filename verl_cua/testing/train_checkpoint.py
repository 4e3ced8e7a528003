"""Checkpoints of a model cache build's training loop (warm starts, in-context copying, reading), so that a build
stopped by Ctrl-C, SIGTERM or a kill continues where it stopped, to the same weights bit for bit.

A checkpoint holds everything the loop's next step reads: the weights, the optimizer's state, torch's RNG state
and the state of each `random.Random` the loop draws from, and the number of steps done. It is written every
`CHECKPOINT_EVERY_S` seconds (`$VERL_CUA_CHECKPOINT_EVERY_S`) and when SIGINT or SIGTERM arrives, always between two
steps (a signal during a step is acted on when it ends), atomically (a temporary file renamed into place), in the
build's state folder beside the model cache (`model_cache.derived_model`), which is removed once the model is
published. Loaded with torch's `weights_only` loader: tensors and plain values only.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHECKPOINT_EVERY_S = 60.0
FORMAT = 1
_stop: list[int] = []  # the signal that asked the armed loop to stop, once it arrives
_armed = [0]  # loops that act on a stop between steps; outside them a signal interrupts at once


class BuildStopped(Exception):
    """A build loop saved its checkpoint and stopped on a signal: `done`/`total` steps of `what`, kept in `path`."""

    def __init__(self, what: str, done: int, total: int, path: Path, signum: int):
        super().__init__(f"{what} stopped at step {done}/{total}; its checkpoint is kept in {path}")
        self.what, self.done, self.total, self.path, self.signum = what, done, total, path, signum


def every_s() -> float:
    """Seconds between periodic checkpoints: `$VERL_CUA_CHECKPOINT_EVERY_S`, else `CHECKPOINT_EVERY_S`."""
    raw = os.environ.get("VERL_CUA_CHECKPOINT_EVERY_S", "")
    try:
        value = float(raw) if raw else CHECKPOINT_EVERY_S
    except ValueError:
        raise ValueError(f"VERL_CUA_CHECKPOINT_EVERY_S must be a number of seconds (got {raw!r})") from None
    return max(0.0, value)


def _on_signal(signum: int, frame: Any) -> None:
    """Between steps of an armed loop: note the stop (a second signal interrupts at once); outside one: interrupt."""
    if _armed[0] and not _stop:
        _stop.append(signum)
        return
    raise KeyboardInterrupt


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM stop an armed loop at its next step boundary (with a checkpoint) inside this block; in the
    main thread only (elsewhere signals cannot be caught, and the block changes nothing)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    _stop.clear()
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        _stop.clear()
        _armed[0] = 0


class Checkpointer:
    """The checkpoint of one training loop (`phase`) of a build; without a state folder (a loop run outside
    `derived_model`) it saves nothing and resumes nothing."""

    def __init__(self, folder: Path | None, phase: str, what: str, total: int):
        self.path = None if folder is None else folder / f"{phase}.pt"
        self.what, self.total = what, total
        self._last = time.monotonic()
        self._every = every_s()

    def exists(self) -> bool:
        """Whether a checkpoint of this loop is kept."""
        return self.path is not None and self.path.is_file()

    def resume(self, model: Any, optim: Any, randoms: dict[str, random.Random]) -> int:
        """Load the kept checkpoint into `model`, `optim`, torch's RNG and `randoms`; the steps it had done (0: none).
        Arms the loop: from here a signal stops it at a step boundary (`step`)."""
        _armed[0] += 1
        if not self.exists():
            return 0
        import torch

        state = torch.load(self.path, weights_only=True)
        if state.get("format") != FORMAT or state.get("total") != self.total or set(state["randoms"]) != set(randoms):
            return 0  # another loop's checkpoint (the recipe's hash names the folder): start afresh
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        torch.set_rng_state(state["torch_rng"])
        for name, rng in randoms.items():
            rng.setstate(_as_state(state["randoms"][name]))
        return int(state["step"])

    def step(self, done: int, model: Any, optim: Any, randoms: dict[str, random.Random]) -> None:
        """After step `done`: save when the interval passed or a signal asked to stop, then stop (`BuildStopped`);
        the last step saves nothing (the model itself is published) and disarms the loop."""
        if done >= self.total:
            _armed[0] = max(0, _armed[0] - 1)
            return
        if not _stop and time.monotonic() - self._last < self._every:
            return
        if self.path is not None:
            self._save(done, model, optim, randoms)
        if _stop:
            _armed[0] = max(0, _armed[0] - 1)
            raise BuildStopped(self.what, done, self.total, self.path or Path("(nowhere)"), _stop[0])

    def _save(self, done: int, model: Any, optim: Any, randoms: dict[str, random.Random]) -> None:
        import torch

        state = {
            "format": FORMAT,
            "step": done,
            "total": self.total,
            "model": model.state_dict(),
            "optim": optim.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "randoms": {name: rng.getstate() for name, rng in randoms.items()},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.path)
        self._last = time.monotonic()


def _as_state(saved: Any) -> tuple:
    """`random.Random.getstate()`'s tuple as saved (torch keeps tuples; a list inside is turned back)."""
    version, internal, gauss = saved
    return version, tuple(internal), gauss


def print_built(prog: str, build: Callable[[], Path]) -> int:
    """Print the path `build()` returns (exit 0); a bad setting is one line (2); a stop by a signal is one line
    saying what was kept and how to go on (128 + the signal: 130 for Ctrl-C)."""
    try:
        print(build())
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except BuildStopped as stop:
        print(f"{prog}: {stop.what} stopped at step {stop.done}/{stop.total}; kept its checkpoint {stop.path}; "
              "run the same command again to continue from it", file=sys.stderr)  # fmt: skip
        return 128 + stop.signum
    except KeyboardInterrupt:
        print(f"{prog}: stopped (Ctrl-C) outside a training step; finished models and checkpoints already written "
              "are kept in the model cache; run the same command again to go on", file=sys.stderr)  # fmt: skip
        return 128 + signal.SIGINT
    return 0
