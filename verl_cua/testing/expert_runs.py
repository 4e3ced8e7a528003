"""Scripted-expert eval runs: the MiniWoB++ oracle played through `run_eval`, so its episodes are ordinary eval run
directories (run.json, `<domain>/<task>/trajectory.jsonl`, screenshots, result.json, summary.json) for SFT data.

`python -m verl_cua.testing.expert_runs OUT --tasks click-test,enter-text --seeds 0-31 --workers 2 --noise 0.0`

How a reply finds its episode: the pool calls `env.reset` in a helper thread of its own (`call_with_timeout`), not
in the worker thread that later calls `complete`, so a thread-local cannot link them. The episode's first turn
shows the reset's screenshot object itself (format pyautogui sends the screen as it is), so `complete` looks up
the env whose latest reset returned `turns[0].image`; each env holds one episode at a time.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_cua.actions import PromptSpec
from verl_cua.envs.base import Observation
from verl_cua.envs.miniwob import MiniWoBEnv
from verl_cua.envs.observation import DEFAULT_BUDGET
from verl_cua.eval.apis import ModelReply, Turn
from verl_cua.eval.runner import EvalConfig, run_eval
from verl_cua.testing.miniwob_oracle import SUPPORTED_TASKS, solution

MODEL = "miniwob-oracle"
MISS = (2, 2)  # task-area pixel on the instruction bar: no task's target is there


@dataclass
class _Episode:
    """An env's current episode: what was reset, its first observation, and the oracle's script once asked."""

    env: MiniWoBEnv
    task: str
    seed: int | None
    obs: Observation
    wrong: bool
    script: list[str] | None = None


class RecordingMiniWoBEnv(MiniWoBEnv):
    """A MiniWoB env that tells its `OracleClient` about every reset (and its close)."""

    def __init__(self, client: OracleClient, **kwargs: Any):
        super().__init__(**kwargs)
        self._client = client

    def reset(self, task: Any = None) -> Observation:
        """Reset as MiniWoBEnv does, then record (env, task, observation) for the oracle."""
        obs = super().reset(task)
        self._client.record_reset(self, task, obs)
        return obs

    def close(self) -> None:
        """Close the browser and drop the env's record."""
        self._client.forget(self)
        super().close()


class OracleClient:
    """A `ChatClient` stand-in that answers each turn with the oracle's next pyautogui text for the episode played.

    A `noise` fraction of episodes (deterministic per noise `seed`, task and episode seed) get the wrong script:
    `solution(..., wrong=True)`, or, for tasks where the oracle has no wrong variant, a click on the instruction bar.
    """

    def __init__(self, *, noise: float = 0.0, seed: int = 0):
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be a fraction in [0, 1], got {noise!r}")
        self.model = MODEL
        self.noise, self.seed = float(noise), int(seed)
        self._episodes: dict[int, _Episode] = {}  # id(env) -> its latest episode
        self._lock = threading.Lock()

    def env_factory(self, **kwargs: Any) -> Callable[[], MiniWoBEnv]:
        """A `run_eval` env factory whose MiniWoB envs (format pyautogui) report their resets to this client."""
        return lambda: RecordingMiniWoBEnv(self, action_format="pyautogui", **kwargs)

    def is_wrong(self, task: str, episode: int | None) -> bool:
        """Whether episode `episode` of `task` gets the wrong script (same answer on every call and run)."""
        return self.noise > 0 and random.Random(f"{self.seed}/{task}/{episode}").random() < self.noise

    def record_reset(self, env: MiniWoBEnv, task: Any, obs: Observation) -> None:
        """Make `obs` the start of `env`'s episode (called by the env, in whichever thread reset it)."""
        name = obs.extra["task"]
        seed = task.get("seed") if isinstance(task, dict) else None
        with self._lock:
            self._episodes[id(env)] = _Episode(env, name, seed, obs, self.is_wrong(name, seed))

    def forget(self, env: MiniWoBEnv) -> None:
        """Drop `env`'s episode (the env is closing)."""
        with self._lock:
            self._episodes.pop(id(env), None)

    def complete(self, spec: PromptSpec, turns: list[Turn], history_images: int) -> ModelReply:
        """The script's text for this turn; "DONE" after the last one, "WAIT" if asked again after that."""
        start = time.perf_counter()
        episode = self._episode_of(turns)
        if episode.script is None:  # the worker holds the env's lease: no step runs while the DOM is read
            episode.script = self._script(episode)
        index, script = len(turns) - 1, episode.script
        text = script[index] if index < len(script) else "DONE" if index == len(script) else "WAIT"
        return ModelReply(
            text=text,
            message={"role": "assistant", "content": text},
            usage={"prompt_tokens": 0, "completion_tokens": 0},
            response={"model": MODEL, "wrong": episode.wrong},
            seconds=time.perf_counter() - start,
        )

    def _episode_of(self, turns: list[Turn]) -> _Episode:
        first = turns[0].image
        with self._lock:
            for episode in self._episodes.values():
                if episode.obs.screenshot is first:
                    return episode
        raise RuntimeError(
            "the oracle found no env reset to this episode's first screenshot: it plays only envs from "
            "OracleClient.env_factory() with --format pyautogui"
        )

    def _script(self, episode: _Episode) -> list[str]:
        right = solution(episode.env, episode.obs)
        if not episode.wrong:
            return right
        try:
            wrong = solution(episode.env, episode.obs, wrong=True)
        except (IndexError, StopIteration):  # e.g. a click-button page whose only button is the target
            wrong = right
        if wrong == right:  # the oracle has no wrong target here: miss every target instead
            x, y = (v * episode.env.scale for v in MISS)
            wrong = [f"```python\npyautogui.click({x}, {y})\n```"]
        return wrong


def expert_runs(
    out: str | Path,
    tasks: str | Sequence[str] = ("click-test",),
    seeds: str = "0-31",
    workers: int = 1,
    noise: float = 0.0,
    seed: int = 0,
    client: OracleClient | None = None,
    observation: str = "screenshot",
    observation_tokens: int = DEFAULT_BUDGET,
) -> dict[str, Any]:
    """Play the oracle on `tasks` x `seeds` into the eval run directory `out` (`observation`: what each step records
    beside the screenshot, e.g. the element table of `screenshot_a11y_tree`); returns run_eval's summary."""
    names = [t.strip() for t in (tasks.split(",") if isinstance(tasks, str) else tasks) if t.strip()]
    unsupported = [n for n in names if n.partition("@")[0] not in SUPPORTED_TASKS]
    if unsupported:
        raise ValueError(f"the oracle cannot play {', '.join(unsupported)}; supported: {', '.join(SUPPORTED_TASKS)}")
    client = client or OracleClient(noise=noise, seed=seed)
    config = EvalConfig(
        env="miniwob",
        tasks=names,
        seeds=seeds,
        model=MODEL,
        format="pyautogui",
        out=str(out),
        workers=workers,
        observation=observation,
        observation_tokens=observation_tokens,
        extra_body={"oracle": {"noise": client.noise, "seed": client.seed}},  # run.json keeps it; a resume checks it
    )
    return run_eval(
        config,
        client=client,
        env_factory=client.env_factory(observation=observation, observation_tokens=observation_tokens),
    )


def main(argv: list[str] | None = None) -> int:
    """Run the oracle and print one line: success rate, episodes, run directory; 2 on a settings mistake."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--tasks", default="click-test", help=f"comma-separated, of {', '.join(SUPPORTED_TASKS)}")
    ap.add_argument("--seeds", default="0-31")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.0, help="fraction of episodes answered with a wrong target")
    ap.add_argument("--seed", type=int, default=0, help="which episodes the noise picks")
    ap.add_argument("--observation", default="screenshot", help="recorded beside each screenshot (OSWorld's types)")
    ap.add_argument("--observation-tokens", type=int, default=DEFAULT_BUDGET, help="the table's budget per step")
    args = ap.parse_args(argv)
    # the pool kills a browser before closing it; selenium's quit then retries the dead driver with a warning each
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    try:
        summary = expert_runs(
            args.out,
            args.tasks,
            args.seeds,
            args.workers,
            args.noise,
            args.seed,
            observation=args.observation,
            observation_tokens=args.observation_tokens,
        )
    except ValueError as exc:
        print(f"expert_runs: {exc}", file=sys.stderr)
        return 2
    rate = summary["success_rate"]
    print(
        f"success rate {'n/a' if rate is None else f'{rate:.3f}'} ({summary['successes']}/{summary['scored']} scored), "
        f"{summary['tasks']} episodes, {summary['infra_failures']} infra failures, out {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
