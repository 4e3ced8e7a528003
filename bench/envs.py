"""Env throughput and overhead, measured side by side in one run: `python -m bench.envs [--steps N]`.

For MiniWoB++ (real headless Chromium) and the local OSWorld desktop (Xvfb + openbox + our server, driven by
OSWorld's DesktopEnv with pause=0): reset and step medians (and the desktop's boot); our overhead over the raw
client call on the same browser/desktop (MiniWoB: `env.step(action)`; OSWorld: `execute_python_command` +
`get_screenshot`; target <= 5% of step time); memory (PSS) per instance; aggregate steps/s for 1, 2, 4 and 8
envs in an `EnvPool` (threads); and, for MiniWoB, threads vs processes at 4.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import statistics
import threading
import time

import numpy as np

from bench.requires import require
from verl_cua.actions import parse_action
from verl_cua.envs import EnvPool, make_env

TASK = "click-button"
XTERM_TASK = {
    "id": "bench-xterm",
    "instruction": "Benchmark: an xterm on the desktop.",
    "config": [{"type": "launch", "parameters": {"command": ["xterm", "-geometry", "100x30+50+50"]}}],
    "evaluator": {  # a real getter and metric that score 1 on any live desktop
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "echo ok", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "ok\n"}},
    },
}
RESET_KINDS = ("ready", "evaluated", "cold")
# what measuring each env needs: the browser, or OSWorld's client driving the local desktop; psutil for memory
ENV_NEEDS = {"miniwob": ("miniwob", "psutil"), "local_desktop": ("desktop_env", "psutil")}
CALC_TASK = {**XTERM_TASK, "id": "bench-calc", "config": [
    {"type": "launch", "parameters": {"command": ["libreoffice", "--calc"]}},
    {"type": "sleep", "parameters": {"seconds": 6}},
]}  # fmt: skip


def _move_texts(screen: tuple[int, int], n: int) -> list[str]:
    """Non-terminating pointer moves across the task area (each returns a fresh screenshot)."""
    w, h = screen
    return [f"```python\npyautogui.moveTo({(17 * i) % w}, {h - 1 - (11 * i) % 40})\n```" for i in range(n)]


def overhead(steps: int) -> dict:
    """Medians of reset, our step and the raw client step, interleaved on one browser."""
    env = make_env("miniwob", task=TASK, action_format="pyautogui")
    try:
        resets = []
        for _ in range(5):
            t = time.perf_counter()
            obs = env.reset(TASK)
            resets.append(time.perf_counter() - t)
        gym_env = env._gym_env.unwrapped
        ours, raw = [], []
        for text in _move_texts(obs.screen, steps):
            t = time.perf_counter()
            result = env.step(text)
            ours.append(time.perf_counter() - t)
            assert not result.done and result.info["action_valid"]
            x, y = parse_action(text, format="pyautogui", screen=obs.screen).actions[0].x, 100
            action = gym_env.create_action("MOVE_COORDS", coords=np.array([x + 0.5, y], dtype=np.float32))
            t = time.perf_counter()
            gym_env.step(action)
            raw.append(time.perf_counter() - t)
        pss = _pss(env.pids())
    finally:
        env.close()
    ours_med, raw_med = statistics.median(ours), statistics.median(raw)
    return {
        "reset_median_ms": round(1000 * statistics.median(resets), 1),
        "step_median_ms": round(1000 * ours_med, 1),
        "raw_step_median_ms": round(1000 * raw_med, 1),
        "overhead_pct": round(100 * (ours_med - raw_med) / raw_med, 1),
        "pss_mb_per_instance": round(pss / 2**20),
    }


def _local_desktop(pause: float = 0.0):
    return make_env("osworld", provider="local", action_format="pyautogui", pause=pause)


def desktop_boot(times: int = 5) -> float:
    """Median seconds from `LocalDesktop.start()` to the first screenshot served (sandbox, Xvfb, openbox, D-Bus)."""
    from verl_cua.envs.osworld.local_desktop import LocalDesktop

    boots = []
    for _ in range(times):
        desktop = LocalDesktop(screen=(1920, 1080))
        t = time.perf_counter()
        desktop.start()
        boots.append(time.perf_counter() - t)
        desktop.stop()
    return statistics.median(boots)


def desktop_overhead(steps: int, resets_n: int = 20) -> dict:
    """The same medians on one local OSWorld desktop; reset p50 and p95 over `resets_n` used desktops of each kind:
    `ready` (evaluated, then 1 s before the reset: the trainer's case, whose next reset comes after a training step,
    so a sandbox prepared during the evaluation is up), `evaluated` (reset right after the evaluation) and `cold` (no
    evaluation: nothing prepared); memory with an xterm and with LibreOffice Calc open."""
    boot = desktop_boot()
    env = _local_desktop()
    try:
        env.reset(XTERM_TASK)
        resets = {kind: [] for kind in RESET_KINDS}
        for i in range(len(RESET_KINDS) * resets_n):
            kind = RESET_KINDS[i % len(RESET_KINDS)]
            env.step("pyautogui.press('shift')")  # a used desktop: reset replaces (or reverts) it
            if kind != "cold":
                env.evaluate()
            if kind == "ready":
                time.sleep(1.0)
            t = time.perf_counter()
            obs = env.reset(XTERM_TASK)
            resets[kind].append(time.perf_counter() - t)
        controller = env.desktop_env.controller
        ours, raw = [], []
        for text in _move_texts(obs.screen, steps):
            t = time.perf_counter()
            result = env.step(text)
            ours.append(time.perf_counter() - t)
            assert not result.done and result.info["action_valid"], result.info
            moved = parse_action(text, format="pyautogui", screen=obs.screen).actions[0]
            code = f"pyautogui.moveTo({moved.x + 1}, {moved.y})"  # a new position, like ours: the pointer moves
            t = time.perf_counter()
            controller.execute_python_command(code)
            controller.get_screenshot()
            raw.append(time.perf_counter() - t)
        pss_xterm = _pss(env.pids())
        env.step("pyautogui.press('shift')")
        env.reset(CALC_TASK)
        pss_calc = _pss(env.pids())
    finally:
        env.close()
    ours_med, raw_med = statistics.median(ours), statistics.median(raw)
    return {
        "boot_median_s": round(boot, 2),
        "reset_ms": {
            kind: {"p50": round(1000 * statistics.median(t), 1), "p95": round(1000 * float(np.percentile(t, 95)), 1)}
            for kind, t in resets.items()
        },
        "step_median_ms": round(1000 * ours_med, 1),
        "raw_step_median_ms": round(1000 * raw_med, 1),
        "overhead_pct": round(100 * (ours_med - raw_med) / raw_med, 1),
        "pss_mb_per_instance": round(pss_xterm / 2**20),
        "pss_mb_per_instance_calc": round(pss_calc / 2**20),
    }


def start_busy_loops(desktop, count: int = 8, settle: float = 0.5) -> list:
    """Start `count` busy loops in `desktop`, a session each, as its agent could; their host processes (psutil)."""
    import psutil

    hog = f"for i in $(seq {count}); do setsid sh -c 'while :; do :; done' & done"
    desktop.request("POST", "/setup/launch", json={"command": hog, "shell": True}, timeout=10).raise_for_status()
    time.sleep(settle)
    loops = []
    for pid in desktop.pids():
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).cmdline()[-1:] == ["while :; do :; done"]:
                loops.append(psutil.Process(pid))
    return loops


def _timed(request, times: int):
    """A measure for `_slowdown`: `request()` run `times` times, each one's seconds appended."""

    def measure(out: list[float]) -> None:
        for _ in range(times):
            t = time.perf_counter()
            request()
            out.append(time.perf_counter() - t)

    return measure


def _command(desktop):
    return lambda: desktop.request("POST", "/execute", json={"command": ["python3", "-c", "sum(range(200000))"]},
                                   timeout=60)  # fmt: skip


def _slowdown(loops: list, measure, rounds: int) -> float:
    """median(busy) / median(quiet) of `measure`, alternating `rounds` times between `loops` stopped and running
    (the host stops and resumes them), so that drift on a noisy machine cancels."""
    import signal

    quiet, busy = [], []
    for _ in range(rounds):
        for p in loops:
            p.send_signal(signal.SIGSTOP)
        measure(quiet)
        for p in loops:
            p.send_signal(signal.SIGCONT)
        time.sleep(0.1)
        measure(busy)
    return statistics.median(busy) / statistics.median(quiet)


def desktop_cpu_isolation(rounds: int = 10, commands: int = 3) -> float:
    """How much one desktop's busy loops (8, a session each) slow another's commands: the median seconds of a small
    Python command on desktop B while A spins over the same while A's loops are stopped."""
    from verl_cua.envs.osworld.local_desktop import LocalDesktop

    a, b = LocalDesktop(screen=(640, 480)), LocalDesktop(screen=(640, 480))
    a.start()
    b.start()
    try:
        return _slowdown(start_busy_loops(a), _timed(_command(b), commands), rounds)
    finally:
        a.stop()
        b.stop()


def desktop_own_load(rounds: int = 10, commands: int = 3) -> dict[str, float]:
    """How much a desktop's own agent, 8 busy loops in its CPU quota, slows that desktop's machinery: an evaluator's
    command (run during an evaluation, as the server's uid) and a screenshot, busy over quiet."""
    from verl_cua.envs.osworld.local_desktop import LocalDesktop

    d = LocalDesktop(screen=(640, 480))
    d.start()
    try:
        loops = start_busy_loops(d)
        with d.evaluation():
            evaluator = _slowdown(loops, _timed(_command(d), commands), rounds)
        shots = _slowdown(loops, _timed(lambda: d.request("GET", "/screenshot", timeout=60), commands), rounds)
        return {"evaluator_command": round(evaluator, 2), "screenshot": round(shots, 2)}
    finally:
        d.stop()


def _pss(pids: list[int]) -> int:
    import psutil

    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_full_info().pss
        except psutil.Error:
            pass
    return total


def pooled(n_envs: int, steps: int, env: str = "miniwob") -> float:
    """Aggregate steps/s with `n_envs` browsers or desktops stepping at once in one EnvPool (threads)."""
    if env == "miniwob":
        factory, task = (lambda: make_env("miniwob", task=TASK, action_format="pyautogui")), TASK
    else:
        factory, task = _local_desktop, XTERM_TASK
    with EnvPool(factory, n_envs) as pool:
        pool.warm()
        leases = [pool.acquire() for _ in range(n_envs)]
        screens = [lease.reset(task).screen for lease in leases]
        barrier = threading.Barrier(n_envs + 1)

        def run(i: int) -> None:
            texts = _move_texts(screens[i], steps)
            barrier.wait()
            for text in texts:
                info = leases[i].step(text).info
                assert not info["infra_failure"], info["error"]

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n_envs)]
        for t in threads:
            t.start()
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        for lease in leases:
            lease.release()
    return n_envs * steps / elapsed


def _process_worker(args: tuple) -> float:
    steps, barrier = args
    env = make_env("miniwob", task=TASK, action_format="pyautogui")
    try:
        screen = env.reset(TASK).screen
        texts = _move_texts(screen, steps)
        barrier.wait()
        start = time.perf_counter()
        for text in texts:
            env.step(text)
        return time.perf_counter() - start
    finally:
        env.close()


def processes(n_envs: int, steps: int) -> float:
    """The same load with one process per env, for the threads-vs-processes choice."""
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(n_envs)
        with ctx.Pool(n_envs) as workers:
            times = workers.map(_process_worker, [(steps, barrier)] * n_envs)
    return n_envs * steps / max(times)


def main() -> None:
    """Print the table and the JSON figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="steps per env per measurement")
    parser.add_argument("--parallel", default="1,2,4,8", help="pool sizes to measure")
    parser.add_argument("--envs", default="miniwob,local_desktop", help="which envs to measure")
    parser.add_argument("--resets", type=int, default=20, help="resets of a used desktop for the p50/p95")
    args = parser.parse_args()
    sizes = [int(n) for n in args.parallel.split(",")]
    require("bench.envs", dict.fromkeys(m for name, needs in ENV_NEEDS.items() if name in args.envs for m in needs))
    res = {}
    if "local_desktop" in args.envs:
        res["local_desktop"] = desktop_overhead(args.steps, args.resets)
        res["local_desktop"]["busy_neighbour_slowdown"] = round(desktop_cpu_isolation(), 2)
        res["local_desktop"]["own_agent_busy_slowdown"] = desktop_own_load()
        res["local_desktop"]["steps_per_s"] = {n: round(pooled(n, args.steps, "local_desktop"), 1) for n in sizes}
        _print_desktop(res["local_desktop"], args.steps)
    if "miniwob" in args.envs:
        res["miniwob"] = overhead(args.steps)
        res["miniwob"]["steps_per_s"] = {n: round(pooled(n, args.steps), 1) for n in sizes}
        res["miniwob"]["steps_per_s_4_processes"] = round(processes(4, args.steps), 1)
        _print_miniwob(res["miniwob"], args.steps)
    print(json.dumps(res))


def _print_desktop(m: dict, steps: int) -> None:
    print(f"Local OSWorld desktop (Xvfb 1920x1080 + openbox + xterm, DesktopEnv pause=0, {steps} steps per env)")
    print(
        f"  boot median {m['boot_median_s']} s; reset of a used desktop (+ xterm setup) p50/p95 "
        + ", ".join(f"{kind} {r['p50']}/{r['p95']} ms" for kind, r in m["reset_ms"].items())
        + "; "
        f"step median {m['step_median_ms']} ms "
        f"(raw client {m['raw_step_median_ms']} ms): our overhead {m['overhead_pct']}% of step time"
    )
    print(
        f"  memory per instance (PSS, whole desktop tree): {m['pss_mb_per_instance']} MB with an xterm, "
        f"{m['pss_mb_per_instance_calc']} MB with LibreOffice Calc open"
    )
    print(f"  a neighbour's 8 busy loops slow a desktop's commands {m['busy_neighbour_slowdown']}x")
    own = m["own_agent_busy_slowdown"]
    print(
        f"  its own agent's 8 busy loops slow its evaluator's commands {own['evaluator_command']}x, its screenshots "
        f"{own['screenshot']}x"
    )
    for n, rate in m["steps_per_s"].items():
        print(f"  {n} desktop(s) in an EnvPool (threads): {rate} steps/s")


def _print_miniwob(m: dict, steps: int) -> None:
    args = argparse.Namespace(steps=steps)
    print(f"MiniWoB++ ({TASK}, headless Chromium, {args.steps} steps per env)")
    print(
        f"  reset median {m['reset_median_ms']} ms, step median {m['step_median_ms']} ms "
        f"(raw client {m['raw_step_median_ms']} ms): our overhead {m['overhead_pct']}% of step time"
    )
    print(f"  memory per instance (PSS, chromedriver + chromium): {m['pss_mb_per_instance']} MB")
    for n, rate in m["steps_per_s"].items():
        print(f"  {n} env(s) in an EnvPool (threads): {rate} steps/s")
    print(f"  4 envs, one process each: {m['steps_per_s_4_processes']} steps/s")


if __name__ == "__main__":
    main()
