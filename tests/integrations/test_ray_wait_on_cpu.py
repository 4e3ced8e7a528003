"""Ray's waits for resources are bounded: a placement group or an actor the cluster cannot place stops the run, once
its wait passes `cua.preflight.resource_timeout`, with one line naming what was asked and what the cluster has; a
wait that ends in time does not. Real Ray clusters (started in a child process, so the watchdog's interrupt never
reaches pytest), and real verl: TransferQueue's storage unit on a 2-slot cluster, the hang users met."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from verl_cua.testing.tiny_models import build_tiny_model

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import ray
    from ray.util.placement_group import placement_group
    from verl_cua.integrations.ray_wait import ResourceWaitError, ResourceWatchdog

    case, bound = sys.argv[1], float(sys.argv[2])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)

    @ray.remote(num_cpus=1)
    class Slot:
        def ping(self):
            return 1

    start = time.monotonic()
    try:
        with ResourceWatchdog(bound, poll=0.5):
            if case == "gpus":
                ray.get(placement_group([{"GPU": 1, "CPU": 1}] * 2, strategy="STRICT_PACK", name="global_pool").ready())
            elif case == "cpu":
                slots = [Slot.remote() for _ in range(3)]  # held: an actor keeps its slot while it lives
                ray.get([slot.ping.remote() for slot in slots])
            elif case == "freed":  # the third slot waits ~3 s, then one holder goes: within the bound
                holders = [Slot.remote() for _ in range(2)]
                ray.get([h.ping.remote() for h in holders])
                third = Slot.remote()
                time.sleep(3)
                ray.kill(holders[0])
                ray.get(third.ping.remote())
        print("FINISHED", round(time.monotonic() - start, 1))
    except ResourceWaitError as exc:
        print("STOPPED", round(time.monotonic() - start, 1), exc)
    """
)


def _run(case, bound, background=False):
    cmd = [sys.executable, "-c", SCRIPT, case, str(bound)]
    if background:  # a job a non-interactive shell starts with `&` ignores SIGINT (launchers, sbatch scripts)
        cmd = ["bash", "-c", 'trap "" INT; "$@" & wait $!', "bash", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(("FINISHED", "STOPPED"))), None)
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    kind, seconds, *message = line.split(" ", 2)
    return kind, float(seconds), (message or [""])[0]


@pytest.mark.e2e
def test_a_placement_group_asking_for_gpus_the_cluster_lacks_stops_naming_them():
    kind, seconds, message = _run("gpus", 4)
    assert kind == "STOPPED" and 4 <= seconds < 20, (seconds, message)
    assert "placement group global_pool (STRICT_PACK) asks 2 x {CPU: 1, GPU: 1}" in message
    assert "GPU 0 (0 free)" in message and "trainer.n_gpus_per_node" in message
    assert "cua.preflight.resource_timeout=4" in message and "\n" not in message


@pytest.mark.e2e
def test_a_run_started_in_the_background_with_sigint_ignored_is_stopped_too():
    kind, seconds, message = _run("gpus", 4, background=True)
    assert kind == "STOPPED" and 4 <= seconds < 20 and "GPU 0 (0 free)" in message, (seconds, message)


def test_the_message_sums_a_groups_bundles_against_what_is_free():
    from verl_cua.integrations.ray_wait import Waiting, describe

    group = Waiting("pg:1", "placement group global_pool (STRICT_PACK)", (({"GPU": 1.0, "CPU": 1.0}, 8),))
    total = {"GPU": 4.0, "CPU": 64.0, "CPU_group_abc": 1.0}
    message = describe([group], total, {"GPU": 4.0, "CPU": 60.0}, 300)
    assert "asks 8 x {CPU: 1, GPU: 1}" in message and "the cluster has GPU 4 (4 free)" in message
    assert "add GPU nodes" in message and "CPU 64" not in message and "_group_" not in message


@pytest.mark.e2e
def test_an_actor_waiting_for_a_cpu_slot_stops_naming_the_slots_and_the_fix():
    kind, seconds, message = _run("cpu", 4)
    assert kind == "STOPPED" and 4 <= seconds < 20, (seconds, message)
    assert "actor Slot asks {CPU: 1}" in message and "CPU 2 (0 free)" in message
    assert "ray_kwargs.ray_init.num_cpus=" in message


@pytest.mark.e2e
def test_a_wait_that_ends_within_the_bound_is_not_stopped():
    kind, seconds, _ = _run("freed", 8)
    assert kind == "FINISHED" and seconds >= 3


@pytest.mark.e2e
def test_verls_transfer_queue_on_too_few_slots_stops_naming_its_storage_unit(tmp_path):
    import psutil

    model = build_tiny_model("qwen25vl")
    started = time.time()
    env = {**os.environ, "MODEL_PATH": str(model), "OUT": str(tmp_path), "STEPS": "1", "HF_HUB_OFFLINE": "1",
           "VENV": str(Path(sys.executable).parents[1])}  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", "recipes/run_tiny_grpo_miniwob_cpu.sh", "ray_kwargs.ray_init.num_cpus=2",
         "+ray_kwargs.ray_init.include_dashboard=false", "cua.preflight.resource_timeout=10",
         "trainer.val_before_train=false"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    seconds = time.monotonic() - start
    lines = [line for line in proc.stderr.splitlines() if line.startswith("verl-cua: Ray has waited")]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    assert "actor SimpleStorageUnit asks {CPU: 1}" in lines[0] and "CPU 2 (0 free)" in lines[0], lines[0]
    assert "cua.preflight.resource_timeout=10 bounds this wait" in lines[0] and seconds < 150
    time.sleep(2)
    procs = [p.info for p in psutil.process_iter(["name", "cmdline", "create_time"])]
    procs = [p for p in procs if p["create_time"] >= started]
    leftover = [p for p in procs if any("ray" in part for part in (p["cmdline"] or [p["name"] or ""])[:2])]
    assert not leftover, leftover  # the run's Ray cluster went down with it
