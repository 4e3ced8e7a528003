"""A small training trace written by the trainer's own trace classes (`EpisodeTrace`, `write_advantages`,
`write_trace_run`) with the agent loop's prompts, for the viewer's tests: three GRPO groups over two training steps.

Step 1, `click-test-seed3` (episode rows): a success, a wrong click answered DONE, an invalid reply (hostile text),
an infra failure. Step 1, `click-test-seed4` (step rows, two history images): 7 steps each, a success and a FAIL.
Step 2, `click-test-seed3`: two episodes that hit max steps (no signal). Advantages are GRPO's, from the rewards.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from omegaconf import OmegaConf
from PIL import Image

from verl_cua.actions import build_prompt, parse_action
from verl_cua.actions.conversation import first_turn, observation_turn, step_prompt
from verl_cua.integrations.verl.trace.episodes import open_trace, trace_prompt, write_advantages, write_trace_run
from verl_cua.testing.viewer_runs import HOSTILE, screenshot

SCREEN = (1280, 720)
IMAGE = (640, 360)
INSTRUCTION = "Click the blue button."
PENALTY = 0.1
HIT, MISS = "pyautogui.click(640, 360)", "pyautogui.click(100, 650)"
# (step, task, uid, layout, episodes: (replies, outcome)); outcome: success | failure | infra
GROUPS: list[tuple[int, str, str, str, list[tuple[list[str], str]]]] = [
    (1, "click-test-seed3", "aaaa1111-0000", "episode", [
        ([HIT], "success"),
        ([MISS, "DONE"], "failure"),
        ([f"I will {HOSTILE} now"], "failure"),
        ([MISS], "infra"),
    ]),
    (1, "click-test-seed4", "bbbb2222-0000", "step", [
        ([MISS] * 6 + [HIT], "success"),
        ([MISS] * 6 + ["FAIL"], "failure"),
    ]),
    (2, "click-test-seed3", "cccc3333-0000", "episode", [([MISS], "failure"), ([MISS], "failure")]),
]  # fmt: skip
INFRA_ERROR = "the desktop crashed: Xvfb exited with status 1"


def _play(trace_dir: Path, step: int, task: str, uid: str, session: int, layout: str, replies, outcome) -> dict:
    """One episode written as the agent loop writes it; its row's `extra_fields` and reward."""
    kwargs = {"uid": uid, "session_id": session, "global_steps": step, "extra_info": {"task_id": task}}
    trace = open_trace({"dir": str(trace_dir)}, kwargs, task)
    spec = build_prompt("pyautogui", screen=SCREEN, image=IMAGE)
    shots = [screenshot(0, IMAGE)]
    messages: list[dict[str, Any]] = first_turn(spec, INSTRUCTION, shots[0])
    texts, errors = [], []
    for i, text in enumerate(replies):
        if layout == "episode":
            prompt = partial(trace_prompt, messages if i == 0 else messages[-1:], shots, 0, "episode")
        else:
            recent = shots[-2:]
            asked = step_prompt(spec, INSTRUCTION, texts, [e is not None for e in errors], recent)
            prompt = partial(trace_prompt, asked, recent, len(shots) - len(recent), "step")
        parsed = parse_action(text, format="pyautogui", screen=SCREEN, image=IMAGE)
        texts.append(text)
        errors.append(None if parsed.valid else parsed.error)
        done = outcome == "success" and i == len(replies) - 1
        info = {"infra_failure": outcome == "infra"}
        trace.step(seen=shots[-1], screen=SCREEN, text=text, parsed=parsed, info=info, reward=float(done),
                   model_s=0.5, env_s=0.25, prompt=prompt)  # fmt: skip
        shots.append(screenshot(i + 1, IMAGE))
        messages += [{"role": "assistant", "content": text}, observation_turn(i + 1, errors[-1], shots[-1])]
    invalid = sum(e is not None for e in errors)
    score = 1.0 if outcome == "success" else 0.0
    ep = SimpleNamespace(
        instruction=INSTRUCTION, infra_failure=outcome == "infra", success=outcome == "success", score=score,
        steps=len(replies), invalid=invalid, infra_error=INFRA_ERROR if outcome == "infra" else None,
        generate_seconds=0.5 * len(replies), env_seconds=0.25 * len(replies),
    )  # fmt: skip
    last = replies[-1]
    end = "infra" if outcome == "infra" else {"DONE": "done", "FAIL": "fail"}.get(last, "")
    end = end or ("env_done" if outcome == "success" else "max_steps")
    reward = 0.0 if outcome == "infra" else score - PENALTY * invalid
    trace.finish(ep, reward, Image.new("RGB", IMAGE, (230, 230, 230)), end)
    return {
        "extra": {"cua_trace_dir": str(trace.dir)},
        "reward": reward,
        "turns": len(replies),
        "infra": ep.infra_failure,
    }


def _rows(played: list[dict], layout: str) -> list[tuple[dict, float, int]]:
    """The rows of one group (one per episode, or per step): extra fields, GRPO advantage, model turns (0: masked)."""
    scored = torch.tensor([p["reward"] for p in played if not p["infra"]])
    mean, std = scored.mean(), scored.std() if len(scored) > 1 else torch.tensor(1.0)
    rows = []
    for p in played:
        value = 0.0 if p["infra"] else float((p["reward"] - mean) / (std + 1e-6))
        if layout == "step":
            rows += [({**p["extra"], "step_index": i}, value, 0 if p["infra"] else 1) for i in range(p["turns"])]
        else:
            rows.append((p["extra"], value, 0 if p["infra"] else p["turns"]))
    return rows


def write_training_trace(trace_dir: Path) -> Path:
    """Write the trace of `GROUPS` into `trace_dir` (a `cua.trace.dir`) and return it."""
    config = OmegaConf.create(
        {"actor_rollout_ref": {"model": {"path": "tiny-qwen25vl"}, "rollout": {"n": 4}},
         "algorithm": {"adv_estimator": "grpo"}}
    )  # fmt: skip
    cua = {"trace": {"dir": str(trace_dir)}, "action": {"format": "pyautogui"}, "env": {"name": "miniwob"}}
    for step in sorted({g[0] for g in GROUPS}):
        rows = []
        for _, task, uid, layout, episodes in (g for g in GROUPS if g[0] == step):
            rows += _rows([_play(trace_dir, step, task, uid, i, layout, *ep) for i, ep in enumerate(episodes)], layout)
        width = 2 * max(turns for _, _, turns in rows) + 1  # each turn: a model token, then an observation token
        adv = torch.tensor([[value] * width for _, value, _ in rows])
        mask = torch.tensor([[1, 0] * turns + [0] * (width - 2 * turns) for _, _, turns in rows])
        write_advantages([extra for extra, _, _ in rows], adv, mask)
        write_trace_run(cua, config, step)
    return trace_dir
