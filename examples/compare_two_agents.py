"""Compare two agents on the same tasks, offline: scripted endpoints stand in for a vLLM-served Qwen3-VL (OpenAI
chat API, `qwen3vl` tool calls) and for Claude (Anthropic Messages API, computer tool) on MiniWoB++ click-button
episodes; then the summary tables, `verl-cua compare` and a `verl-cua view` report.

Run: python examples/compare_two_agents.py [--out runs/demo] [--episodes 4]
With real endpoints the same commands are in README.md ("Compare two agents"); this needs Chromium only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from verl_cua.actions import parse_action
from verl_cua.cli import main as cli
from verl_cua.envs import make_env
from verl_cua.testing.chat_server import ScriptedChatServer
from verl_cua.testing.miniwob_oracle import solution

TASK = "click-button"


def scripted_episodes(count: int) -> list[tuple[int, str, tuple[int, int], tuple[int, int], tuple[int, int]]]:
    """(seed, instruction, screen, right click, wrong click) for `count` seeds with distinct instructions."""
    env = make_env("miniwob", action_format="pyautogui")
    found, seen = [], set()
    try:
        for seed in range(100):
            obs = env.reset({"task": TASK, "seed": seed})
            if obs.instruction in seen:  # the scripts answer by instruction: keep them apart
                continue
            seen.add(obs.instruction)
            try:  # the oracle reads the page: the right button, and another one
                texts = [solution(env, obs, wrong=wrong)[0] for wrong in (False, True)]
            except (IndexError, KeyError):  # a page with one button has no wrong click
                continue
            clicks = [parse_action(t, format="pyautogui", screen=obs.screen).actions[0] for t in texts]
            clicks = [(a.x, a.y) for a in clicks]
            found.append((seed, obs.instruction, obs.screen, clicks[0], clicks[1]))
            if len(found) == count:
                return found
    finally:
        env.close()
    raise RuntimeError(f"fewer than {count} distinct {TASK} instructions in 100 seeds")


def qwen3vl_click(point: tuple[int, int], screen: tuple[int, int]) -> str:
    """A Qwen3-VL tool call clicking `point` (0..1000 coordinates, which the parser maps back to that very pixel on
    screens up to 1000 px: it rounds `x * width / 1000` to the nearest pixel)."""
    x, y = (round(1000 * v / s) for v, s in zip(point, screen, strict=True))
    call = {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [x, y]}}
    return f"I click the target.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"


def claude_click(point: tuple[int, int], seed: int) -> list[dict]:
    """Claude's content blocks clicking `point` (its screenshot is the screen itself at this size)."""
    use = {"type": "tool_use", "id": f"toolu_{seed:04d}", "name": "computer",
           "input": {"action": "left_click", "coordinate": list(point)}}  # fmt: skip
    return [{"type": "text", "text": "Clicking the button."}, use]


def main() -> None:
    """Two scripted agents, two eval runs, one comparison and one report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/demo")
    ap.add_argument("--episodes", type=int, default=4)
    args = ap.parse_args()
    episodes = scripted_episodes(args.episodes)
    seeds = ",".join(str(e[0]) for e in episodes)
    # agent A misses the last episode; agent B misses every other one
    qwen = {instr: [qwen3vl_click(wrong if i == len(episodes) - 1 else right, screen)]
            for i, (_, instr, screen, right, wrong) in enumerate(episodes)}  # fmt: skip
    claude = {instr: [claude_click(wrong if i % 2 else right, seed)]
              for i, (seed, instr, _, right, wrong) in enumerate(episodes)}  # fmt: skip
    out = Path(args.out)
    runs = {"qwen3vl-8b": ("openai", "qwen3vl", qwen), "claude-sonnet-4.5": ("anthropic", "claude", claude)}
    for name, (api, fmt, script) in runs.items():
        server = ScriptedChatServer(script, fallback="DONE")
        try:
            cli(["eval", "--env", "miniwob", "--tasks", TASK, "--seeds", seeds, "--model", name, "--format", fmt,
                 "--provider-api", api, "--base-url", server.url, "--max-steps", "1", "--no-progress",
                 "--out", str(out / name)])  # fmt: skip
        finally:
            server.close()
    cli(["compare", *(str(out / name) for name in runs)])
    cli(["view", *(str(out / name) for name in runs), "--out", str(out / "report.html")])


if __name__ == "__main__":
    main()
