"""verl's metrics file read back after crashes and resumes: a cut last line is skipped (and said), records of a step
are merged with later keys winning, each step once and in order; a writer SIGKILLed mid-run loses no complete line."""

import json
import logging
import signal
import textwrap

import pytest

from verl_cua.metrics_log import read_records, training_steps
from verl_cua.testing.kill import kill_when


def _line(step, **data) -> str:
    return json.dumps({"step": step, "data": data}) + "\n"


def test_a_resumed_run_shows_each_step_once_with_the_rerun_values(tmp_path):
    log = tmp_path / "metrics.jsonl"
    first = [_line(0, **{"val/acc": 0.1}), _line(1, **{"timing_s/step": 3.0, "cua/success_rate": 0.2})]
    first += [_line(2, **{"timing_s/step": 4.0, "cua/success_rate": 0.3, "val/acc": 0.4})]
    first += [_line(3, **{"timing_s/step": 5.0, "cua/success_rate": 0.9})]  # killed after step 3; checkpoint at 2
    resumed = [_line(2, **{"val/acc": 0.41}), _line(3, **{"timing_s/step": 6.0, "cua/success_rate": 0.5})]
    log.write_text("".join(first + resumed))
    records = read_records(log)
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert records[2]["data"] == {"timing_s/step": 4.0, "cua/success_rate": 0.3, "val/acc": 0.41}  # training kept
    assert records[3]["data"] == {"timing_s/step": 6.0, "cua/success_rate": 0.5}  # the re-run wins
    steps = training_steps(log)
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert [s["cua/success_rate"] for s in steps] == [0.2, 0.3, 0.5]
    assert [s["step"] for s in training_steps(log, "val/acc")] == [0, 2]


def test_lines_that_are_not_records_are_skipped_and_counted(tmp_path, caplog):
    log = tmp_path / "metrics.jsonl"
    good = [_line(2, a=2.0), _line(1, a=1.0)]
    bad = ["[1, 2]\n", '{"step": "1", "data": {}}\n', '{"step": true, "data": {}}\n', '{"step": 3}\n']
    log.write_bytes(("".join([good[0], *bad, "\n", good[1]]) + _line(4, a=4.0)[:-9]).encode() + b"\xff")
    with caplog.at_level(logging.WARNING, logger="verl_cua.metrics_log"):
        records = read_records(log)
    assert records == [{"step": 1, "data": {"a": 1.0}}, {"step": 2, "data": {"a": 2.0}}]
    assert "skipped 5 line(s)" in caplog.text and str(log) in caplog.text


def test_a_clean_file_says_nothing_and_a_missing_one_raises(tmp_path, caplog):
    log = tmp_path / "metrics.jsonl"
    log.write_text(_line(1, **{"timing_s/step": 1.0}))
    with caplog.at_level(logging.WARNING, logger="verl_cua.metrics_log"):
        assert training_steps(log) == [{"step": 1, "timing_s/step": 1.0}]
    assert caplog.text == ""
    with pytest.raises(FileNotFoundError):
        read_records(tmp_path / "absent.jsonl")


# verl's FileLogger writes one unbuffered `write` per record; this writer splits each record in two writes so that a
# kill between them leaves the cut line a crash can leave (a record larger than a pipe's atomic write).
WRITER = textwrap.dedent(
    """
    import json, sys, time
    with open(sys.argv[1], "wb", buffering=0) as f:
        step = 0
        while True:
            step += 1
            line = json.dumps({"step": step, "data": {"timing_s/step": step * 0.5, "pad": "x" * 200}}).encode()
            f.write(line[:100])
            time.sleep(0.002)
            f.write(line[100:] + b"\\n")
    """
)


def test_a_writer_killed_mid_run_loses_no_complete_line(tmp_path, caplog):
    log = tmp_path / "metrics.jsonl"
    writer = kill_when(WRITER, [str(log)], lambda: log.exists() and log.read_bytes().count(b"\n") >= 30, timeout=30)
    assert writer.returncode == -signal.SIGKILL
    raw = log.read_bytes()
    complete = raw.count(b"\n")
    assert complete >= 30
    with caplog.at_level(logging.WARNING, logger="verl_cua.metrics_log"):
        steps = training_steps(log)
    assert [s["step"] for s in steps] == list(range(1, complete + 1))
    assert [s["timing_s/step"] for s in steps] == [0.5 * k for k in range(1, complete + 1)]
    cut = not raw.endswith(b"\n")
    assert ("skipped 1 line(s)" in caplog.text) == cut
