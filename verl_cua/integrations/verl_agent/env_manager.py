"""`GUIEnvironmentManager`: verl-agent's environment-manager interface over our `EnvPool` (OSWorld, MiniWoB++).

verl-agent steps every env in lockstep, one model turn per step, one screenshot per prompt.
Each step's prompt is our format's system prompt, the task, the last
`env.history_length` model outputs as text, and the screenshot resized for the processor. Anchors are short
screenshot hashes, so GiGPO's step groups work. A desktop that breaks ends its episode as an infra failure, and
`success_evaluator` takes that trajectory out of the batch: it never counts as the agent's failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verl_cua.actions import ParsedAction
from verl_cua.actions.geometry import smart_resize_size
from verl_cua.actions.prompts import PromptSpec, build_prompt, observation_text, turn_context
from verl_cua.actions.types import one_line
from verl_cua.envs import EnvLease, EnvPool, EnvUsageError, Observation, env_spec
from verl_cua.envs.observation import observation_type
from verl_cua.envs.task_sets import TaskRef
from verl_cua.integrations.verl_agent.anchor import StepAnchor, screen_anchor, without_vision_markup
from verl_cua.integrations.verl_agent.projection import gui_projection
from verl_cua.integrations.verl_agent.settings import TRAIN_SEEDS, VAL_SEEDS, EnvSettings

logger = logging.getLogger(__name__)

DATASET_CMD = "python -m verl_cua.integrations.verl.dataset --host verl-agent"
MIN_PIXELS = 256 * 256  # verl-agent's process_image upsizes anything smaller, which would move the coordinates


class Fleet:
    """The pool the train and validation managers share (they never run at once), and the threads that drive it."""

    def __init__(self, pool: EnvPool):
        self.pool = pool
        self.executor = ThreadPoolExecutor(max_workers=pool.size, thread_name_prefix="verl-cua-agent")
        self.closed = False
        self.owner: GUIEnvironmentManager | None = None

    def claim(self, manager: GUIEnvironmentManager) -> None:
        """Hand every env to `manager`: the other manager's episodes (a rollout cut short) give theirs back."""
        if self.owner is not None and self.owner is not manager:
            self.owner._release_all()
        self.owner = manager

    def map(self, fn: Callable, *iterables) -> list:
        """`fn` over the items, all at once, results in order."""
        return list(self.executor.map(fn, *iterables))

    def close(self) -> None:
        """Close every env and thread (once)."""
        if not self.closed:
            self.closed = True
            self.pool.close()
            self.executor.shutdown(wait=False, cancel_futures=True)


@dataclass
class _EnvState:
    """One env position of the batch during one rollout."""

    ref: TaskRef
    lease: EnvLease | None = None
    spec: PromptSpec | None = None
    instruction: str = ""
    screen: tuple[int, int] = (0, 0)
    image_size: tuple[int, int] = (0, 0)
    image: np.ndarray | None = None
    anchor: StepAnchor | None = None
    steps: int = 0
    history: list[str] = field(default_factory=list)
    last_error: str | None = None
    done: bool = False
    won: bool = False
    score: float | None = None
    infra_failure: bool = False
    error: str | None = None
    context: str | None = None  # the format's per-turn text (api_gui: focused app, its APIs, last API result)
    marks: dict | None = None  # the set-of-marks centres of the screen shown (observation som), for tag_N points


class GUIEnvironmentManager:
    """verl-agent's `EnvironmentManagerBase` interface (reset / step / build_text_obs / success_evaluator / close)
    for one of our envs. `env_num` tasks per reset, each played by `group_n` envs in a row (group-contiguous)."""

    def __init__(
        self,
        fleet: Fleet,
        name: str,
        settings: EnvSettings,
        tasks: Sequence[TaskRef],
        *,
        env_num: int,
        group_n: int,
        max_steps: int,
        history_length: int,
        seed: int,
        is_train: bool,
    ):
        if not tasks:
            raise EnvUsageError(f"no {name} tasks to play")
        self.fleet, self.envs = fleet, fleet.pool  # `envs`: what verl-agent's managers call their vector env
        self.name, self.settings, self.tasks = name, settings, list(tasks)
        self.env_num, self.group_n = int(env_num), int(group_n)
        self.max_steps, self.history_length, self.is_train = int(max_steps), int(history_length), is_train
        self.projection_f = gui_projection
        self.rng = np.random.RandomState(seed)
        # an env of seeded tasks draws fresh seeds per reset, unless the tasks name their own (`name@seed`)
        self.fixed_tasks = not env_spec(name).seeded_tasks or any("@" in t for t in settings.tasks.split(","))
        self._states: list[_EnvState] = []

    # -- verl-agent's interface ---------------------------------------------------------------------------------
    def reset(self, kwargs: Sequence[dict] | None = None) -> tuple[dict[str, list], list[dict]]:
        """Start a rollout: the dataset rows' `env_kwargs` name the tasks (one per env, already grouped), else
        `env_num` tasks are drawn and each repeated `group_n` times. Returns `({'text','image','anchor'}, infos)`."""
        refs = self._refs_from_rows(kwargs) if kwargs is not None else self._sample_refs()
        if len(refs) > self.envs.size:
            raise EnvUsageError(f"{len(refs)} envs asked for, but the pool holds {self.envs.size}")
        self.fleet.claim(self)
        self._release_all()
        self._states = [_EnvState(ref) for ref in refs]
        self.fleet.map(self._reset_one, self._states)
        infos = [self._info(st, valid=True) for st in self._states]
        return self._observations(), infos

    def step(self, text_actions: Sequence[str]) -> tuple[dict[str, list], np.ndarray, np.ndarray, list[dict]]:
        """Apply one model output per env (envs already done keep their last screen, reward 0, done)."""
        if len(text_actions) != len(self._states):
            raise EnvUsageError(f"{len(text_actions)} actions for {len(self._states)} envs")
        live = [i for i, st in enumerate(self._states) if not st.done]
        parsed, valids = self.projection_f(
            [text_actions[i] for i in live],
            format=self.settings.format,
            screens=[self._states[i].screen for i in live],
            images=[self._states[i].image_size for i in live],
            marks=[self._states[i].marks for i in live],
        )
        rewards = np.zeros(len(self._states), dtype=np.float32)
        valid_flags = np.ones(len(self._states), dtype=bool)
        stepped = self.fleet.map(
            self._step_one, [self._states[i] for i in live], [text_actions[i] for i in live], parsed
        )
        for i, reward, valid in zip(live, stepped, valids, strict=True):
            rewards[i], valid_flags[i] = reward, bool(valid)
        dones = np.array([st.done for st in self._states], dtype=bool)
        infos = [self._info(st, valid=bool(v)) for st, v in zip(self._states, valid_flags, strict=True)]
        return self._observations(), rewards, dones, infos

    def build_text_obs(self) -> list[str]:
        """One prompt per env: the format's system prompt, the task, the recent outputs, then `<image>`."""
        return [self._text(st) for st in self._states]

    def success_evaluator(self, *args, **kwargs) -> dict[str, np.ndarray]:
        """`success_rate` per env (its `won`), and per domain; trajectories that ended in an infra failure are
        taken out of training by clearing their `active_masks` (unless every one failed)."""
        total_batch_list = kwargs["total_batch_list"]
        if len(total_batch_list) != len(self._states):
            raise EnvUsageError(f"{len(total_batch_list)} trajectories for {len(self._states)} envs")
        infra = [st.infra_failure for st in self._states]
        if any(infra) and not all(infra):
            for steps, failed in zip(total_batch_list, infra, strict=True):
                if failed:
                    for item in steps:
                        item["active_masks"] = False
        elif all(infra):
            logger.warning("every env of this rollout hit an infra failure; its samples are kept (reward 0)")
        won = np.array([float(st.won) for st in self._states])
        out = {"success_rate": won}
        scored = [float(st.won) for st in self._states if not st.infra_failure]
        out["success_rate_without_infra"] = np.array(scored if scored else [0.0])
        out["infra_failure_success_rate"] = np.array(infra, dtype=float)  # logged: verl-agent logs '*success_rate*'
        for domain in sorted({st.ref.domain for st in self._states}):
            out[f"{domain}/success_rate"] = np.array([float(st.won) for st in self._states if st.ref.domain == domain])
        return out

    def close(self) -> None:
        """Release the envs and close the shared pool."""
        self._release_all()
        self.fleet.close()

    # -- tasks ----------------------------------------------------------------------------------------------------
    def _sample_refs(self) -> list[TaskRef]:
        picks = self.rng.choice(len(self.tasks), self.env_num, replace=len(self.tasks) < self.env_num)
        refs = []
        for k in picks:
            ref = self.tasks[int(k)]
            if not self.fixed_tasks:
                lo, hi = TRAIN_SEEDS if self.is_train else VAL_SEEDS
                seed = int(self.rng.randint(lo, hi))
                ref = TaskRef(ref.env, {**ref.task, "seed": seed}, ref.domain, f"seed-{seed}")
            refs.extend([ref] * self.group_n)
        return refs

    def _refs_from_rows(self, rows: Sequence[dict]) -> list[TaskRef]:
        """Rows written by `python -m verl_cua.integrations.verl.dataset --host verl-agent`."""
        refs = []
        for row in rows:
            if not isinstance(row, dict) or "task" not in row:
                raise EnvUsageError(f"env_kwargs rows must carry 'task' (write them with {DATASET_CMD}); got {row!r}")
            task = json.loads(row["task"]) if isinstance(row["task"], str) and row["task"][:1] in "{[" else row["task"]
            refs.append(TaskRef(self.name, task, str(row.get("domain") or self.name), str(row.get("task_id") or "")))
        return refs

    # -- one env ----------------------------------------------------------------------------------------------------
    def _reset_one(self, st: _EnvState) -> None:
        try:
            st.lease = self.envs.acquire(timeout=self.settings.reset_timeout, task=st.ref.task)
        except (TimeoutError, RuntimeError) as exc:
            self._fail(st, f"no env: {exc}")
            return
        obs = st.lease.reset(st.ref.task)
        if st.lease.infra_failure:
            self._fail(st, st.lease.error)
            obs = Observation(obs.screenshot, "", {})
        st.instruction = obs.instruction
        st.screen = obs.screen
        st.image_size = smart_resize_size(
            st.screen, self.settings.factor, MIN_PIXELS, max(MIN_PIXELS, int(self.settings.max_pixels))
        )
        shown = observation_type(obs.extra)
        st.spec = build_prompt(self.settings.format, screen=st.screen, image=st.image_size, observation=shown)
        self._see(st, obs)

    def _step_one(self, st: _EnvState, text: str, parsed: ParsedAction) -> float:
        st.steps += 1
        st.history.append(one_line(without_vision_markup(text), self.settings.history_chars))
        st.last_error = None if parsed.valid else parsed.error
        result = st.lease.step(parsed)
        if result.info.get("infra_failure"):
            self._fail(st, result.info.get("error"))
            return 0.0
        self._see(st, result.observation)
        if not (parsed.terminal or result.done or st.steps >= self.max_steps):
            return 0.0
        score = st.lease.evaluate()
        if st.lease.infra_failure:
            self._fail(st, st.lease.error)
            return 0.0
        st.score, st.won, st.done = float(score), float(score) >= self.settings.success_threshold, True
        self._release(st)
        return float(score)

    def _see(self, st: _EnvState, obs: Observation) -> None:
        shot = obs.screenshot.convert("RGB")
        if shot.size != st.image_size:
            shot = shot.resize(st.image_size)
        st.image = np.asarray(shot, dtype=np.uint8)
        st.anchor = screen_anchor(st.image, st.steps)
        st.context = turn_context(self.settings.format, obs.extra)
        st.marks = obs.extra.get("marks")

    def _fail(self, st: _EnvState, error: str | None) -> None:
        st.infra_failure, st.done, st.won, st.error = True, True, False, error or "infra failure"
        logger.warning("%s task %s: infra failure: %s", self.name, st.ref.key, st.error)
        if st.image is None:
            st.image_size = st.image_size if st.image_size != (0, 0) else (MIN_PIXELS // 256, 256)
            st.image = np.zeros((st.image_size[1], st.image_size[0], 3), dtype=np.uint8)
            st.anchor = screen_anchor(st.image, st.steps)
        if st.spec is None:
            st.screen = st.image_size
            st.spec = build_prompt(
                self.settings.format, screen=st.screen, image=st.image_size, observation=self.settings.observation
            )
        self._release(st)

    def _release(self, st: _EnvState) -> None:
        if st.lease is not None:
            st.lease.release()
            st.lease = None

    def _release_all(self) -> None:
        for st in self._states:
            self._release(st)

    # -- what the model gets ------------------------------------------------------------------------------------
    def _observations(self) -> dict[str, list | None]:
        shown = any(st.spec is None or st.spec.screenshot for st in self._states)  # a11y_tree: text, as ALFWorld's
        return {
            "text": self.build_text_obs(),
            "image": [st.image for st in self._states] if shown else None,
            "anchor": [st.anchor for st in self._states],
        }

    def _text(self, st: _EnvState) -> str:
        parts = [st.spec.system, "", without_vision_markup(st.spec.user_text(st.instruction))]
        recent = st.history[-self.history_length :] if self.history_length > 0 else []
        if recent:
            first = len(st.history) - len(recent) + 1
            parts += ["", "Your previous outputs, oldest first:"]
            parts += [f"Step {first + k}: {text}" for k, text in enumerate(recent)]
        if st.steps:
            parts += ["", observation_text(st.steps, without_vision_markup(st.last_error or "") or None)]
        if st.context:
            parts += ["", without_vision_markup(st.context)]
        if st.spec.screenshot:
            parts.append("<image>")
        return "\n".join(parts)

    def _info(self, st: _EnvState, *, valid: bool) -> dict[str, Any]:
        return {
            "won": bool(st.won),
            "is_action_valid": np.array(int(valid)),
            "score": st.score,
            "infra_failure": st.infra_failure,
            "error": st.error,
            "task": st.ref.key,
            "data_source": f"verl_cua/{self.name}",
            "step": st.steps,
        }
