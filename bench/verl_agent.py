"""The verl-agent env manager's cost per lockstep step over bare env steps, side by side in one run:
`python -m bench.verl_agent`.

Both play 2 MiniWoB++ envs (one group) on the same pool with the same non-terminating Qwen2.5-VL pointer moves:
the bare loop parses each text and steps the leased envs in parallel; `GUIEnvironmentManager.step` also resizes
each screenshot for the processor, hashes it into an anchor and builds the prompts. Rounds alternate manager and
bare; figures are medians of per-step times.

On the 2-core CI machine (`--steps 8 --rounds 5`): 115-125 ms per step through the manager vs 111-123 ms
bare, ratio 1.019 and 1.038 in two runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench.requires import require
from verl_cua.actions import parse_action

TASK = {"task": "click-button", "seed": 0}


def move(k: int) -> str:
    """A pointer move in Qwen2.5-VL's tool-call format that never ends the episode."""
    args = {"action": "mouse_move", "coordinate": [40 + 10 * (k % 10), 60 + 5 * (k % 7)]}
    return "<tool_call>" + json.dumps({"name": "computer_use", "arguments": args}) + "</tool_call>"


def manager_round(envs, steps: int) -> list[float]:
    """Seconds per `envs.step` over one episode of `steps` steps."""
    rows = [{"task": json.dumps(TASK), "domain": "click-button", "task_id": "seed-0"}] * 2
    envs.reset(rows)
    times = []
    for k in range(steps):
        t = time.perf_counter()
        envs.step([move(k), move(k + 1)])
        times.append(time.perf_counter() - t)
    envs._release_all()
    return times


def bare_round(envs, steps: int) -> list[float]:
    """Seconds per parallel parse-and-step of the same envs, leased straight from the manager's pool."""
    leases = [envs.envs.acquire() for _ in range(2)]
    fleet = envs.fleet
    try:
        screens = [obs.screen for obs in fleet.map(lambda lease: lease.reset(TASK), leases)]
        image = envs._states[0].image_size
        times = []
        for k in range(steps):
            t = time.perf_counter()
            texts = [move(k), move(k + 1)]
            parsed = [
                parse_action(x, format="qwen25vl", screen=s, image=image) for x, s in zip(texts, screens, strict=True)
            ]
            fleet.map(lambda lease, p: lease.step(p), leases, parsed)
            times.append(time.perf_counter() - t)
        return times
    finally:
        for lease in leases:
            lease.release()


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: prints one JSON line with medians and their ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    require("bench.verl_agent", ("omegaconf", "miniwob"))
    from omegaconf import OmegaConf

    from verl_cua.integrations.verl_agent import make_gui_envs

    config = OmegaConf.create(
        {
            "env": {
                "env_name": "miniwob",
                "seed": 0,
                "max_steps": args.steps + 1,
                "history_length": 2,
                "rollout": {"n": 2},
                "miniwob": {"tasks": "click-button", "format": "qwen25vl"},
            },
            "data": {"train_batch_size": 1, "val_batch_size": 1},
        }
    )
    envs, _ = make_gui_envs(config)
    try:
        manager_round(envs, 2)  # warm: browsers built, pages loaded
        managed, bare = [], []
        for _ in range(args.rounds):
            managed += manager_round(envs, args.steps)
            bare += bare_round(envs, args.steps)
    finally:
        envs.close()
    m, b = statistics.median(managed), statistics.median(bare)
    print(json.dumps({"manager_ms": round(m * 1000, 1), "bare_ms": round(b * 1000, 1), "ratio": round(m / b, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
