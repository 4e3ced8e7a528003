"""The run summary of a run killed and resumed from a checkpoint: each training step once, the re-run's figures."""

import json

from verl_cua.integrations.verl import summary


def _line(step, **data) -> str:
    return json.dumps({"step": step, "data": data}) + "\n"


def test_summary_counts_each_step_once_after_a_kill_and_a_resume(tmp_path):
    log = tmp_path / "metrics.jsonl"
    killed = [_line(0, **{"val-core/acc": 0.1})]
    killed += [_line(s, **{"cua/episodes": 8, "cua/success_rate": s / 10, "cua/infra_failures": 1}) for s in (1, 2, 3)]
    resumed = [_line(2, **{"val-core/acc": 0.3})]  # resumed from global_step_2: validation at step 2 again
    resumed += [_line(s, **{"cua/episodes": 8, "cua/success_rate": s / 5, "cua/infra_failures": 0}) for s in (3, 4)]
    log.write_text("".join(killed + resumed) + '{"step": 5, "data": {"cua/epi')  # and killed again mid-line
    out = tmp_path / "summary.json"
    assert summary.main([str(log), "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["steps"] == 4 and figures["per_step"]["step"] == [1, 2, 3, 4]
    assert figures["per_step"]["success_rate"] == [0.1, 0.2, 0.6, 0.8]
    assert figures["infra_failures"] == 2  # steps 1 and 2 of the first run; its step 3 was re-run without one
