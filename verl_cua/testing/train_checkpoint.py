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
_installed = [False]  # whether `stop_signals` holds the handlers (main thread only): loops arm only then


class SignalStop(KeyboardInterrupt):
    """A build stopped by SIGINT or SIGTERM (`signum`): a KeyboardInterrupt, so no `except Exception` swallows it."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def how(self) -> str:
        """`Ctrl-C` or `SIGTERM`."""
        return "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name


class BuildStopped(SignalStop):
    """A build loop saved its checkpoint and stopped on a signal: `done`/`total` steps of `what`, kept in `path`."""

    def __init__(self, what: str, done: int, total: int, path: Path, signum: int):
        super().__init__(signum)
        self.what, self.done, self.total, self.path = what, done, total, path


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
    raise SignalStop(signum)


def pending_stop() -> None:
    """Act on a signal noted during a loop's last step (the model is published by now): stop (`SignalStop`)."""
    if _stop:
        raise SignalStop(_stop[0])


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM stop an armed loop at its next step boundary (with a checkpoint) inside this block; in the
    main thread only (elsewhere signals cannot be caught, and the block changes nothing)."""
    import threading

    if threading.current_thread() is not threading.main_thread() or _installed[0]:
        yield
        return
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    _stop.clear()
    _armed[0], _installed[0] = 0, True
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        _stop.clear()
        _armed[0], _installed[0] = 0, False


class Checkpointer:
    """The checkpoint of one training loop (`phase`) of a build; without a state folder (a loop run outside
    `derived_model`) it saves nothing and resumes nothing."""

    def __init__(self, folder: Path | None, phase: str, what: str, total: int):
        self.path = None if folder is None else folder / f"{phase}.pt"
        self.what, self.total = what, total
        self._last = time.monotonic()
        self._every = every_s()
        self._loaded: dict | None = None

    def exists(self) -> bool:
        """Whether a usable checkpoint of this loop is kept (one that does not load, or of another loop, is not)."""
        return self._state() is not None

    def _state(self) -> dict | None:
        """The kept checkpoint, loaded once; None when there is none, it does not load (a warning) or is another's."""
        if self._loaded is None:
            self._loaded = {}
            if self.path is not None and self.path.is_file():
                import torch

                try:
                    state = torch.load(self.path, weights_only=True)
                except Exception as exc:  # a file cut by a crash, or of another torch: start afresh
                    print(f"verl-cua cache: {self.path} does not load ({type(exc).__name__}); starting {self.what} "
                          "afresh", file=sys.stderr)  # fmt: skip
                    state = {}
                if isinstance(state, dict) and state.get("format") == FORMAT and state.get("total") == self.total:
                    self._loaded = state
        return self._loaded or None

    def resume(self, model: Any, optim: Any, randoms: dict[str, random.Random]) -> int:
        """Load the kept checkpoint into `model`, `optim`, torch's RNG and `randoms`; the steps it had done (0: none).
        Arms the loop: from here a signal stops it at a step boundary (`step`)."""
        if _installed[0]:
            _armed[0] += 1
        state = self._state()
        if state is None or set(state["randoms"]) != set(randoms):
            return 0
        import torch

        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        torch.set_rng_state(state["torch_rng"])
        for name, rng in randoms.items():
            rng.setstate(_as_state(state["randoms"][name]))
        self._loaded = {}  # loaded into the loop: not kept twice in memory
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
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())  # on disk before it replaces the last one: a crash keeps one whole checkpoint
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
        print(f"{prog}: {stop.what} stopped ({stop.how}) at step {stop.done}/{stop.total}; kept its checkpoint "
              f"{stop.path}; run the same command again to continue from it", file=sys.stderr)  # fmt: skip
        return 128 + stop.signum
    except KeyboardInterrupt as exc:
        stop = exc if isinstance(exc, SignalStop) else SignalStop()
        print(f"{prog}: stopped ({stop.how}) outside a training step; finished models and checkpoints already "
              "written are kept in the model cache; run the same command again to go on", file=sys.stderr)  # fmt: skip
        return 128 + stop.signum
    return 0
