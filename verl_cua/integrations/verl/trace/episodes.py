"""The training trace (`cua.trace.dir`): rollouts on disk in the eval harness's format, for `verl-cua view`.

The agent loop writes each sampled episode as it plays it (`<dir>/step_<global step>/<task>/<uid>-<session>/`:
the screenshots the model saw, one line per step with the prompt's text and its images as those screenshots' file
names, `result.json` with the reward); the trainer adds each step's
advantage (the mean over that turn's model tokens) once the estimator has run, then writes the step directory's
index (`episodes.json`, last): the viewer lists exactly those episodes, so a step re-run after a resume shows each
of its episodes once and episodes cut off by a kill never show as results. Whole groups are sampled (a hash of
the group's uid below `fraction`) every `every` training steps.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from verl_cua.envs.trajectory import (
    RESULT,
    RUN,
    EpisodeWriter,
    prompt_record,
    read_result,
    screenshot_name,
    step_record,
    write_index,
    write_json,
)
from verl_cua.integrations.verl.config.schema import CuaConfig, TraceConfig

logger = logging.getLogger(__name__)


def sampled(trace: TraceConfig | Mapping[str, Any], uid: Any, global_steps: Any) -> bool:
    """Whether the group `uid` of training step `global_steps` is traced (`trace`: `cua.trace`)."""
    trace = TraceConfig.of(trace)
    if not trace.dir or global_steps is None or int(global_steps) % trace.every:
        return False
    digest = hashlib.sha1(str(uid).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < trace.fraction


class EpisodeTrace:
    """One traced episode: screenshots and step lines as the agent loop plays it, then its result."""

    def __init__(self, directory: Path, task_id: str):
        self.writer = EpisodeWriter(directory)
        self.dir = directory
        self.task_id = task_id
        self._shots = 0
        self.broken = False

    def step(self, *, seen: Image.Image, screen, text: str, parsed, info: dict, reward: float, model_s: float,
             env_s: float, prompt: Callable[[], dict] | None = None, read: str | None = None) -> None:  # fmt: skip
        """One model turn: the screenshot it acted on, its text, the parsed action, what the env said, the prompt
        (`prompt()`, a `trace_prompt` call: built here, where a failure only stops the trace) and the element table
        or marks it read (`read`)."""
        self._safely(self._step, seen, screen, text, parsed, info, reward, model_s, env_s, prompt, read)

    def _step(self, seen, screen, text, parsed, info, reward, model_s, env_s, prompt, read) -> None:
        name = self.writer.screenshot(self._shots, seen)
        self._shots += 1
        self.writer.step(
            step_record(
                step=self._shots,
                screenshot=name,
                screen=screen,
                model_text=text,
                action=parsed.to_dict(),
                valid=parsed.valid,
                error=parsed.error,
                env_error=info.get("error") if parsed.valid else None,  # else it repeats the parse error
                infra_failure=bool(info.get("infra_failure")),
                reward=float(reward),
                timing={"model_s": model_s, "env_s": env_s},
                prompt=prompt() if prompt is not None else None,
                elements_text=read,
            )
        )

    def finish(self, ep, reward: float, final: Image.Image | None, end_reason: str) -> None:
        """`result.json` in the eval format, plus the training reward."""
        self._safely(self._finish, ep, reward, final, end_reason)

    def _finish(self, ep, reward: float, final: Image.Image | None, end_reason: str) -> None:
        final_name = self.writer.screenshot(self._shots, final) if final is not None else None
        status = "infra_failure" if ep.infra_failure else "success" if ep.success else "failure"
        task = self.dir.parent.name
        self.writer.finish(
            {
                "task": f"{task}/{self.dir.name}",
                "domain": task,
                "task_id": self.task_id,
                "instruction": ep.instruction,
                "status": status,
                "score": None if ep.infra_failure else float(ep.score),
                "reward": float(reward),
                "steps": ep.steps,
                "invalid_actions": ep.invalid,
                "end_reason": end_reason,
                "error": ep.infra_error,
                "final_screenshot": final_name,
                "model_seconds": ep.generate_seconds,
                "env_seconds": ep.env_seconds,
            }
        )

    def _safely(self, fn, *args) -> None:
        """A full or vanished disk must not stop training: the trace stops, with one warning."""
        if self.broken:
            return
        try:
            fn(*args)
        except OSError as exc:
            self.broken = True
            self.writer.close()
            logger.warning("cua.trace: stopped writing %s: %s", self.dir, exc)


def trace_prompt(messages: list[dict], images: list, first: int, layout: str) -> dict:
    """The `prompt` of a traced step: `messages` (`layout` as in `prompt_record`) with each of `images` (the
    episode's screenshots `first`, `first + 1`, ... as the agent loop holds them) named by its file in the trace."""
    names = {id(image): screenshot_name(first + i) for i, image in enumerate(images)}
    return prompt_record(messages, lambda image: names.get(id(image)), layout=layout)


class MarkValidation:
    """The trainer's validation dataloader with `cua_validate` on every row: verl does not tell the agent loop which
    rollouts validate, and a traced validation rollout must not land among a training step's groups."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        for batch in self.loader:
            batch["cua_validate"] = np.array([True] * len(batch["raw_prompt"]), dtype=object)  # as verl adds uid
            yield batch

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)


def open_trace(trace: TraceConfig | Mapping[str, Any], kwargs: dict[str, Any], task: Any) -> EpisodeTrace | None:
    """The trace of this agent-loop call's episode, or None when it is not sampled (or tracing is off).
    Validation rollouts go to `val_step_<N>/` (no advantages), training ones to `step_<N>/`."""
    trace, uid, steps = TraceConfig.of(trace), kwargs.get("uid"), kwargs.get("global_steps")
    if not sampled(trace, uid, steps):
        return None
    prefix = "val_step" if kwargs.get("cua_validate") else "step"
    info = kwargs.get("extra_info") or {}
    task_id = str(info.get("task_id") or (task.get("task") if isinstance(task, dict) else task))
    name = Path(task_id).stem if task_id.endswith(".json") else task_id
    if isinstance(task, dict) and task.get("seed") is not None:
        name = f"{name}-seed{task['seed']}"
    directory = Path(trace.dir) / f"{prefix}_{int(steps):06d}" / name / f"{str(uid)[:8]}-{kwargs.get('session_id', 0)}"
    try:
        return EpisodeTrace(directory, task_id)
    except OSError as exc:  # a full or missing disk must not stop training
        logger.warning("cua.trace: cannot write %s: %s", directory, exc)
        return None


def turn_advantages(advantages: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Mean advantage of each model turn of one row: each run of 1s in the response mask is a turn."""
    out, total, count = [], 0.0, 0
    for adv, m in zip(advantages.tolist(), mask.tolist(), strict=False):
        if m:
            total, count = total + adv, count + 1
        elif count:
            out.append(total / count)
            total, count = 0.0, 0
    if count:
        out.append(total / count)
    return out


def write_advantages(extra: list[dict], advantages: torch.Tensor, response_mask: torch.Tensor) -> int:
    """Add `step_advantages` to the result.json of each traced row's episode, then index each step directory's
    episodes (`episodes.json`, written last); returns the episodes written."""
    episodes: dict[str, dict[int, float]] = {}
    for i, e in enumerate(extra):
        path = e.get("cua_trace_dir")
        if not path or e.get("cua_replayed"):  # a replayed success is an older step's episode
            continue
        turns = turn_advantages(advantages[i], response_mask[i])
        steps = episodes.setdefault(path, {})
        if "step_index" in e:  # step rows: one row per step
            steps[int(e["step_index"])] = turns[0] if turns else 0.0
        else:
            steps.update(enumerate(turns))
    complete: dict[Path, list[str]] = {}  # step directory -> its episodes' keys
    for path, steps in episodes.items():
        result_path = Path(path) / RESULT
        try:
            result = read_result(path)
            if result is None:
                raise OSError("no result.json")
            n = max(int(result.get("steps") or 0), max(steps, default=-1) + 1)
            result["step_advantages"] = [steps.get(k) for k in range(n)]
            write_json(result_path, result)
            step_dir = Path(path).parent.parent  # <dir>/step_<N>/<task>/<uid>-<session>
            complete.setdefault(step_dir, []).append(Path(path).relative_to(step_dir).as_posix())
        except (OSError, ValueError) as exc:
            logger.warning("cua.trace: cannot add advantages to %s: %s", result_path, exc)
    for step_dir, keys in complete.items():
        try:
            write_index(step_dir, keys)
        except OSError as exc:
            logger.warning("cua.trace: cannot index %s: %s", step_dir, exc)
    return len(episodes)


def write_trace_run(cua: CuaConfig | Mapping[str, Any], config, global_steps: int) -> None:
    """`run.json` of a traced training step, so `verl-cua view` can say what produced it (`cua`: the `cua.*`
    config, typed or as the trainer's plain dict)."""
    cua = CuaConfig.of(cua)
    path = Path(cua.trace.dir) / f"step_{int(global_steps):06d}" / RUN
    meta = {
        "name": f"step {int(global_steps)}",
        "model": str(config.actor_rollout_ref.model.path),
        "format": cua.action.format,
        "env": cua.env.name,
        "estimator": str(config.algorithm.adv_estimator),
        "global_step": int(global_steps),
        "rollout_n": int(config.actor_rollout_ref.rollout.n),
    }
    try:
        write_json(path, meta)
    except OSError as exc:
        logger.warning("cua.trace: cannot write %s: %s", path, exc)
