"""`recipes/run_tiny_coda_miniwob_cpu.sh` without training (stub interpreters): MODE=recorded records the oracle's runs
with the element table, turns them into labelled states and hands verl rows of them in planner mode `recorded`;
RUNS= skips the recording; EXECUTOR=openai passes the endpoint on; a bad MODE is one line naming the valid ones."""

import os
import subprocess
from pathlib import Path

from verl_cua.recipe_export.record import main_overrides, record_calls, write_stubs

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "run_tiny_coda_miniwob_cpu.sh"


def _calls(tmp_path: Path, **env_vars: str) -> list[list[str]]:
    stubs = write_stubs(tmp_path / "stub")
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "VENV": str(stubs.parent), "OUT": str(tmp_path / "out"),
           "MODEL_PATH": "tiny", **env_vars}  # fmt: skip
    return record_calls(RECIPE, stubs, tmp_path, env=env)


def _module_calls(calls: list[list[str]], module: str) -> list[list[str]]:
    return [c for c in calls if c[1:3] == ["-m", module]]


def test_recorded_mode_records_the_oracle_then_trains_on_its_labelled_states(tmp_path):
    calls = _calls(tmp_path, MODE="recorded", RECORD_SEEDS="0-3")
    recorded = _module_calls(calls, "verl_cua.testing.expert_runs")
    assert [c[c.index("--seeds") + 1] for c in recorded] == ["0-3", "100000-100063"]  # training states, held-out
    assert all(c[c.index("--observation") + 1] == "screenshot_a11y_tree" for c in recorded)  # the table is recorded
    states = _module_calls(calls, "verl_cua.sft.recorded_states")
    assert states[0][3] == recorded[0][3] and states[0][states[0].index("--labels") + 1] == "success"
    overrides = main_overrides(calls)
    assert "cua.planner.mode=recorded" in overrides and "cua.executor.kind=standin_grounding" in overrides
    out = tmp_path / "out"
    assert f"data.train_files={out / 'train.parquet'}" in overrides
    assert not _module_calls(calls, "verl_cua.integrations.verl.dataset")  # no task rows in this mode


def test_named_runs_and_a_judge_skip_the_recording(tmp_path):
    calls = _calls(tmp_path, MODE="recorded", RUNS="runs/a,runs/b", LABELS="judge", JUDGE="judge.jsonl")
    assert [c[c.index("--seeds") + 1] for c in _module_calls(calls, "verl_cua.testing.expert_runs")] == [
        "100000-100063"
    ]  # only the held-out states are recorded
    (train, _heldout) = _module_calls(calls, "verl_cua.sft.recorded_states")
    assert train[3:5] == ["runs/a", "runs/b"] and train[train.index("--judge") + 1] == "judge.jsonl"


def test_an_openai_executor_gets_its_endpoint(tmp_path):
    overrides = main_overrides(_calls(tmp_path, EXECUTOR="openai", EXECUTOR_MODEL="tiny-exec"))
    assert {"cua.executor.kind=openai", "cua.executor.model=tiny-exec"} <= set(overrides)
    assert "cua.executor.base_url=http://127.0.0.1:8000/v1" in overrides
    standin = main_overrides(_calls(tmp_path / "s"))
    assert not any(o.startswith(("cua.executor.base_url", "cua.executor.model")) for o in standin)


def test_a_bad_mode_is_one_line(tmp_path):
    stubs = write_stubs(tmp_path / "stub")
    env = {**os.environ, "VENV": str(stubs.parent), "MODE": "offline", "OUT": str(tmp_path / "out")}
    proc = subprocess.run(["bash", str(RECIPE)], capture_output=True, text=True, env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "run_tiny_coda_miniwob_cpu.sh: MODE=offline is not valid; valid: online, recorded"
    )
