"""`cua.trace.log_episodes`: a traced training step's episodes sent to the user's logger as images.

Each picked episode becomes one filmstrip image (`trace.filmstrip.render_episode`) sent through verl's `Tracking`:
wandb gets `cua/episodes` (a list of `wandb.Image`s, captioned with task, status and score), tensorboard one image
per episode (`cua/episodes/<i>`) and its actions as markdown (`cua/episodes/<i>/actions`). Backends that cannot show
images (console, file, mlflow, ...) are skipped. Nothing here may stop training: a failure is one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.integrations.verl.trace.filmstrip import episode_markdown, episode_title, render_episode, same_size
from verl_cua.viewer.runs import Run, load_run

logger = logging.getLogger(__name__)

IMAGE_TAG = "cua/episodes"


def trace_step_dir(trace_dir: str | Path, global_steps: int) -> Path:
    """The run directory of training step `global_steps` in the trace (`<dir>/step_<N:06d>`)."""
    return Path(trace_dir) / f"step_{int(global_steps):06d}"


def pick_episodes(run: Run, count: int) -> list[EpisodeRecord]:
    """`count` finished episodes: the first success and the first failure (by episode key), then the rest in order."""
    finished = [run.episodes[key] for key in sorted(run.episodes) if run.episodes[key].result is not None]
    firsts = [next((e.key for e in finished if e.status == status), None) for status in ("success", "failure")]
    order = [key for key in firsts if key is not None] + [e.key for e in finished if e.key not in firsts]
    return [run.episodes[key] for key in order[: max(0, count)]]


def _to_wandb(wandb: Any, episodes: list[EpisodeRecord], images: list[Image.Image], step: int) -> Iterator[None]:
    """One `wandb.log` of all images under `cua/episodes`: one panel, captioned; wandb wants them of one size."""
    logged = [wandb.Image(im, caption=episode_title(e)) for e, im in zip(episodes, same_size(images), strict=True)]
    wandb.log({IMAGE_TAG: logged}, step=step)
    yield from (None for _ in images)


def _to_tensorboard(
    adapter: Any, episodes: list[EpisodeRecord], images: list[Image.Image], step: int
) -> Iterator[None]:
    """One image tag per episode slot (sizes differ, so no `add_images` batch) and its actions as text."""
    writer = getattr(adapter, "writer", adapter)  # verl's _TensorboardAdapter holds the SummaryWriter
    for i, (episode, image) in enumerate(zip(episodes, images, strict=True)):
        writer.add_image(f"{IMAGE_TAG}/{i}", np.asarray(image), global_step=step, dataformats="HWC")
        yield
        writer.add_text(f"{IMAGE_TAG}/{i}/actions", episode_markdown(episode), global_step=step)
    writer.flush()


SENDERS = {"wandb": _to_wandb, "tensorboard": _to_tensorboard}


def log_traced_episodes(tracking: Any, run_dir: Path, step: int, episodes: int) -> int:
    """Send `episodes` traced episodes of `run_dir` (one training step's run directory in the trace) to the image
    backends of verl's `tracking` at `step`; returns the images sent, summed over backends. A torn trace or a
    failing logger is one warning, never an exception."""
    backends = {name: b for name, b in (getattr(tracking, "logger", None) or {}).items() if name in SENDERS}
    if int(episodes) <= 0 or not backends:
        return 0
    try:
        picked = pick_episodes(load_run(run_dir), int(episodes))
        images = [render_episode(episode) for episode in picked]
    except Exception as exc:  # a torn trace must not stop training
        logger.warning(
            "cua.trace.log_episodes: cannot render the episodes of %s: %s: %s", run_dir, type(exc).__name__, exc
        )
        return 0
    sent = 0
    for name, backend in backends.items():
        try:
            for _ in SENDERS[name](backend, picked, images, step):
                sent += 1
        except Exception as exc:  # a logger's failure must not stop training either
            logger.warning(
                "cua.trace.log_episodes: the %s logger failed on step %s's episode images: %s: %s",
                name, step, type(exc).__name__, exc,
            )  # fmt: skip
    return sent


def log_trace_step(tracking: Any, cua: dict[str, Any], global_steps: int) -> int:
    """`log_traced_episodes` for training step `global_steps` as `cua.trace` configures it (0 when off)."""
    trace = cua.get("trace") or {}
    count = int(trace.get("log_episodes") or 0)
    if not trace.get("dir") or count <= 0:
        return 0
    return log_traced_episodes(tracking, trace_step_dir(trace["dir"], global_steps), int(global_steps), count)
