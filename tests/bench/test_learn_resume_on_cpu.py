"""bench.learn reads a run that was killed and resumed: each training step's success once, held-out once per step."""

import json

from bench import learn


def test_read_run_keeps_one_success_per_step_after_a_resume(tmp_path):
    log = tmp_path / "metrics.jsonl"
    heldout = learn.HELDOUT_KEY + "4"
    lines = [{"step": 0, "data": {heldout: 0.1}}]
    lines += [{"step": s, "data": {learn.SUCCESS_KEY: s / 10, **({heldout: 0.2} if s == 2 else {})}} for s in (1, 2, 3)]
    lines += [{"step": 2, "data": {heldout: 0.25}}]  # resumed from step 2: its validation again
    lines += [{"step": s, "data": {learn.SUCCESS_KEY: s / 4}} for s in (3, 4)]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = learn.read_run(log)
    assert run.success_rate == [0.1, 0.2, 0.75, 1.0]
    assert run.heldout_success_rate == [0.1, 0.25]  # steps 0 and 2 (the resumed run's), not three values
