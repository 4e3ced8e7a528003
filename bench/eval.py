"""The eval harness's cost per step over a bare agent loop, side by side in one run: `python -m bench.eval`.

Both loops play the same episodes on the same env against the same scripted chat server (non-terminating pointer
moves in Qwen3-VL's format): the bare loop encodes the screenshot, posts the last K of them, parses the reply and
steps the env; the harness (`run_episode`) also resizes for the model, writes every screenshot and step line to disk
and keeps the raw replies. Rounds alternate harness and bare; figures are medians of per-step times. Envs: MiniWoB++
(160x210 screenshots) and, when installed, the local OSWorld desktop (1920x1080, pause=0); an env whose packages
are missing is skipped with a JSON line naming their install command (the other env is still measured).

On the 2-core CI machine (`--steps 8 --rounds 5` and `--rounds 7`, two runs): local desktop 352-385 ms per step
through the harness vs 351-380 ms bare (ratio 1.003-1.014; 35 KB on disk and 110 KB sent per step); MiniWoB
153-168 ms vs 146-160 ms (1.04-1.05). Before the harness reused one PNG encoding for the request and the file and
left upsizing to the server's processor, the ratios were 1.12 and 1.22.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.envs import ENV_NEEDS, XTERM_TASK
from bench.requires import missing_line
from verl_cua.actions import parse_action
from verl_cua.actions.prompts import build_prompt
from verl_cua.envs import EnvPool, make_env
from verl_cua.envs.task_sets import TaskRef
from verl_cua.envs.trajectory import EpisodeWriter
from verl_cua.eval import ChatClient, EpisodeSettings, run_episode
from verl_cua.testing.chat_server import ScriptedChatServer

HISTORY = 3
ENVS = {
    "miniwob": (lambda: make_env("miniwob", action_format="qwen3vl"), {"task": "click-button", "seed": 0}),
    "local_desktop": (lambda: make_env("osworld", provider="local", action_format="qwen3vl", pause=0.0), XTERM_TASK),
}


def _moves(n: int) -> list[str]:
    calls = []
    for i in range(n):
        args = {"action": "mouse_move", "coordinate": [100 + 37 * i % 800, 900 - 23 * i % 800]}
        calls.append(f'<tool_call>\n{{"name": "computer_use", "arguments": {json.dumps(args)}}}\n</tool_call>')
    return calls


def _bare_episode(lease, task, url: str, steps: int, http: httpx.Client) -> int:
    """A hand-written loop with nothing but what an agent needs; returns the request bytes sent."""
    obs = lease.reset(task)
    spec = build_prompt("qwen3vl", screen=obs.screen)
    images: list[str] = []
    sent = 0
    messages: list[dict] = [{"role": "system", "content": spec.system}]
    for step in range(steps):
        buf = io.BytesIO()
        obs.screenshot.save(buf, format="PNG", compress_level=3)
        images.append(base64.b64encode(buf.getvalue()).decode())
        text = spec.user_text(obs.instruction) if step == 0 else f"Screenshot after step {step}."
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        content = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b}"}} for b in images[-HISTORY:]]
        body = {
            "model": "bench-bare",
            "messages": messages[:-1] + [{"role": "user", "content": content}],
            "max_tokens": 64,
        }
        data = json.dumps(body).encode()
        sent += len(data)
        reply = http.post(f"{url}/chat/completions", content=data, headers={"Content-Type": "application/json"}).json()
        answer = reply["choices"][0]["message"]["content"]
        messages.append({"role": "assistant", "content": answer})
        obs = lease.step(parse_action(answer, format="qwen3vl", screen=obs.screen)).observation
    lease.evaluate()
    return sent


def compare(env_name: str, steps: int, rounds: int) -> dict:
    """Per-step medians of the harness and the bare loop on `env_name`, alternating, and the disk they use."""
    factory, task = ENVS[env_name]
    server = ScriptedChatServer({"": _moves(steps)})
    client = ChatClient("openai", "bench", base_url=server.url, max_tokens=64)
    settings = EpisodeSettings("qwen3vl", max_steps=steps, history_images=HISTORY)
    out = Path(tempfile.mkdtemp(prefix="verl-cua-bench-eval-"))
    ours, bare, sent = [], [], []
    try:
        with EnvPool(factory, 1) as pool, httpx.Client(timeout=60) as http:
            with pool.acquire() as lease:  # warm-up of both loops: env start, imports, first connections
                _bare_episode(lease, task, server.url, 2, http)
            with pool.acquire() as lease:
                warm = EpisodeWriter(out / "warm-up")
                run_episode(lease, TaskRef(env_name, task, "bench", "warm-up"), client, settings, warm)
                warm.close()
            for r in range(rounds):
                with pool.acquire() as lease:
                    writer = EpisodeWriter(out / f"round-{r}")
                    start = time.perf_counter()
                    result = run_episode(lease, TaskRef(env_name, task, "bench", str(r)), client, settings, writer)
                    ours.append((time.perf_counter() - start) / steps)
                    writer.finish(result)
                    assert result["status"] != "infra_failure", result["error"]
                with pool.acquire() as lease:
                    start = time.perf_counter()
                    sent.append(_bare_episode(lease, task, server.url, steps, http))
                    bare.append((time.perf_counter() - start) / steps)
        disk = sum(f.stat().st_size for f in out.glob("round-*/*")) / rounds / steps
        harness_bytes = [len(json.dumps(r["body"])) for r in server.requests if r["body"]["model"] == "bench"]
    finally:
        server.close()
        shutil.rmtree(out, ignore_errors=True)
    ms_ours, ms_bare = 1000 * statistics.median(ours), 1000 * statistics.median(bare)
    return {
        "env": env_name,
        "steps_per_episode": steps,
        "rounds": rounds,
        "harness_ms_per_step": round(ms_ours, 1),
        "bare_ms_per_step": round(ms_bare, 1),
        "overhead_ratio": round(ms_ours / ms_bare, 3),
        "disk_kb_per_step": round(disk / 1024, 1),
        "request_kb_mean": round(statistics.mean(harness_bytes) / 1024, 1),
        "bare_request_kb_mean": round(statistics.mean(sent) / steps / 1024, 1),
    }


def main(argv: list[str] | None = None) -> None:
    """CLI: print one JSON line per env."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8, help="steps per episode")
    ap.add_argument("--rounds", type=int, default=5, help="episodes per loop, alternating")
    ap.add_argument("--envs", default="miniwob,local_desktop")
    args = ap.parse_args(argv)
    names = args.envs.split(",")
    unmet = {name: missing_line(ENV_NEEDS.get(name, ())) for name in names}  # an env that cannot run is skipped
    for name in names:
        if unmet[name] is not None:
            print(json.dumps({"env": name, "skipped": unmet[name]}), flush=True)
            continue
        try:
            print(json.dumps(compare(name, args.steps, args.rounds)), flush=True)
        except (ImportError, RuntimeError, OSError) as exc:
            print(json.dumps({"env": name, "skipped": f"{type(exc).__name__}: {exc}"}), flush=True)


if __name__ == "__main__":
    main()
