"""GUI metrics count each episode once; dataset rows are verl's; the run summary reads verl's file logger."""

import json

import pandas as pd
import pytest

from verl_cua.integrations.verl import dataset, summary
from verl_cua.integrations.verl.metrics import gui_metrics


def _ep(success, steps, invalid, infra=False, **extra):
    return {
        "cua_success": success,
        "cua_score": 1.0 if success else 0.0,
        "cua_infra_failure": infra,
        "cua_steps": steps,
        "cua_invalid_actions": invalid,
        "cua_truncated": False,
        "cua_env_seconds": 1.0,
        "cua_generate_seconds": 2.0,
        **extra,
    }


def test_gui_metrics_excludes_infra_failures_from_rates_and_counts_step_rows_once():
    rows = [
        _ep(True, 2, 0),
        _ep(False, 4, 2),
        _ep(False, 0, 0, infra=True),
        _ep(False, 3, 3, step_index=0),
        _ep(False, 3, 3, step_index=1),  # same episode, second step row
        _ep(False, 3, 3, step_index=2),
    ]
    m = gui_metrics(rows)
    assert m["cua/episodes"] == 4
    assert m["cua/infra_failures"] == 1
    assert m["cua/success_rate"] == pytest.approx(1 / 3)
    assert m["cua/invalid_action_rate"] == pytest.approx(5 / 9)
    assert m["cua/steps_mean"] == pytest.approx(3.0)
    assert gui_metrics([None, {}]) == {}


def test_a_desktop_the_agent_broke_is_a_failure_in_the_rates_and_counted_apart():
    rows = [_ep(True, 2, 0), _ep(False, 1, 0, cua_desktop_broken=True), _ep(False, 0, 0, infra=True)]
    m = gui_metrics(rows)
    assert m["cua/desktop_broken"] == 1 and m["cua/infra_failures"] == 1
    assert m["cua/success_rate"] == pytest.approx(1 / 2)  # the broken desktop's episode counts as a failure


def test_miniwob_dataset_rows(tmp_path, chromium):
    out = tmp_path / "train.parquet"
    assert (
        dataset.main(["--env", "miniwob", "--tasks", "click-test,enter-text", "--seeds", "0-1", "--out", str(out)]) == 0
    )
    df = pd.read_parquet(out)
    assert len(df) == 4 and set(df["agent_name"]) == {"gui_agent"}
    first = df.iloc[0]
    assert first["extra_info"]["task"] == "click-test" and first["extra_info"]["seed"] == 0
    assert sorted(int(r["index"]) for r in df["extra_info"]) == [0, 1, 2, 3]
    assert list(first["prompt"][0].keys()) == ["role", "content"]


def test_osworld_dataset_rows_validate_every_task(tmp_path):
    from verl_cua.envs.osworld.tasks import TASK_ROOT

    out = tmp_path / "os.parquet"
    assert dataset.main(["--env", "osworld", "--tasks", str(TASK_ROOT / "calc"), "--out", str(out)]) == 0
    df = pd.read_parquet(out)
    assert len(df) == len(list((TASK_ROOT / "calc").glob("*.json"))) >= 1
    assert all(r["task"].endswith(".json") and r["seed"] == -1 for r in df["extra_info"])
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert dataset.main(["--env", "osworld", "--tasks", str(bad), "--out", str(tmp_path / "x.parquet")]) == 2


def test_unknown_miniwob_task_is_one_line(capsys, chromium):
    assert dataset.main(["--env", "miniwob", "--tasks", "no-such-task", "--out", "/tmp/unused.parquet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("verl-cua dataset: unknown MiniWoB task(s) no-such-task; e.g.") and "\n" not in err


def test_summary_reads_verl_file_logger(tmp_path):
    log = tmp_path / "metrics.jsonl"
    lines = [
        {
            "step": 1,
            "data": {
                "critic/rewards/mean": -0.2,
                "cua/success_rate": 0.0,
                "cua/invalid_action_rate": 1.0,
                "cua/infra_failures": 1,
                "cua/episodes": 8,
                "timing_s/step": 10.0,
            },
        },
        {"step": 1, "data": {"val-core/x": 1.0}},  # validation line: ignored
        {
            "step": 2,
            "data": {
                "critic/rewards/mean": 0.5,
                "cua/success_rate": 0.5,
                "cua/invalid_action_rate": 0.25,
                "cua/infra_failures": 0,
                "cua/episodes": 8,
                "timing_s/step": 9.0,
            },
        },
    ]
    log.write_text("\n".join(json.dumps(x) for x in lines))
    out = tmp_path / "summary.json"
    assert summary.main([str(log), "--seconds", "42", "--out", str(out)]) == 0
    s = json.loads(out.read_text())
    assert (s["steps"], s["reward_mean"], s["success_rate"], s["invalid_action_rate"]) == (2, 0.5, 0.5, 0.25)
    assert s["infra_failures"] == 1 and s["seconds"] == 42
    assert s["per_step"]["reward_mean"] == [-0.2, 0.5] and s["per_step"]["seconds_step"] == [10.0, 9.0]
    assert (s["window"], s["first_window_success"], s["last_window_success"]) == (1, 0.0, 0.5)


def test_summary_windows_and_eval_runs(tmp_path, capsys):
    log = tmp_path / "metrics.jsonl"
    rates = [0.1, 0.0, 0.2, 0.1, 0.1, 0.3, 0.4, 0.5, 0.6, 0.5, 0.7, 0.6]
    log.write_text("\n".join(json.dumps({"step": i + 1, "data": {"cua/success_rate": r, "cua/episodes": 32}})
                             for i, r in enumerate(rates)))  # fmt: skip
    before, after = tmp_path / "before", tmp_path / "after"
    for run, (hits, n) in ((before, (3, 32)), (after, (20, 32))):
        run.mkdir()
        figures = {"success_rate": hits / n, "successes": hits, "scored": n, "success_rate_ci95": [0.0, 1.0]}
        (run / "summary.json").write_text(json.dumps(figures))
    out = tmp_path / "summary.json"
    assert summary.main([str(log), "--out", str(out), "--eval", f"initial={before}", "--eval", f"trained={after}"]) == 0
    s = json.loads(out.read_text())
    assert s["window"] == 5
    assert abs(s["first_window_success"] - 0.1) < 1e-9 and abs(s["last_window_success"] - 0.58) < 1e-9
    assert s["eval"]["initial"]["success_rate"] == 3 / 32 and s["eval"]["trained"]["successes"] == 20
    printed = capsys.readouterr().out
    assert "over the last 5: 0.580" in printed and "trained: success 20/32" in printed
    assert summary.main([str(log), "--out", str(out), "--eval", f"x={tmp_path / 'missing'}"]) == 2


@pytest.mark.parametrize("spec", ["click-test", "click-test:0-9", "click-test::100-109", ":0-9:100-109"])
def test_summary_blind_wants_tasks_train_and_heldout_seeds(tmp_path, capsys, spec):
    log = tmp_path / "metrics.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"cua/success_rate": 0.5}}))
    out = tmp_path / "summary.json"
    assert summary.main([str(log), "--out", str(out), "--blind", spec]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "TASKS:TRAIN_SEEDS:HELDOUT_SEEDS" in err and not out.exists()


def test_a_planners_executor_is_counted_per_episode_and_absent_from_runs_without_one():
    from verl_cua.integrations.verl.planner.counts import NO_PLANNER, PlannerCounts

    planner = PlannerCounts(calls=3, failures=1, rejected=1, seconds=1.5).fields()
    rows = [_ep(False, 3, 1, infra=True, **planner, step_index=i) for i in range(3)] + [_ep(True, 1, 0, **NO_PLANNER)]
    m = gui_metrics(rows)
    assert (m["cua/executor_calls"], m["cua/executor_failures"], m["cua/executor_rejected"]) == (3, 1, 1)
    assert m["cua/infra_failures"] == 1 and m["cua/executor_seconds_mean"] == pytest.approx(0.75)
    assert "cua/executor_calls" not in gui_metrics([_ep(True, 1, 0, **NO_PLANNER)])  # the negative control
