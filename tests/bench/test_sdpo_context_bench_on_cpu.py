"""`python -m bench.sdpo_context` on the learnable tiny model and real click-test pages: every teacher context is
scored against the student on the same response, and `information` is demo right minus demo wrong, layout by
layout."""

import json

import pytest

from bench.sdpo_context import GATE, _far_corner, gate_failures, main


def test_far_corner_is_outside_the_target():
    box = (20.0, 60.0, 70.0, 90.0)  # task-area pixels, top-left quarter
    assert _far_corner(box, 1, (160, 210)) == (155, 205)
    x, y = _far_corner((100.0, 150.0, 150.0, 200.0), 1, (160, 210))
    assert (x, y) == (5, 55) and not (100 <= x < 150 and 150 <= y < 200)


def test_the_gate_names_each_bound_a_model_misses():
    good = {"header": [0.1, -0.2], "information": [1.5, 1.0], "teacher success": [1.0, 1.0, 0.0, 1.0, 1.0]}
    assert gate_failures(good) == []
    bad = {"header": [-3.4], "information": [0.1], "teacher success": [0.0, 1.0]}
    failures = gate_failures(bad)
    assert len(failures) == 3 and failures[0].startswith("block presence -3.40")
    assert f"(< {GATE['teacher success']})" in failures[2]


def test_probe_on_two_layouts(chromium, tmp_path, capsys):
    out = tmp_path / "probe.json"
    # one probe run: --gate fails it, and it still writes its figures
    assert main(["--layouts", "2", "--out", str(out), "--gate"]) == 1
    result = json.loads(out.read_text())
    names = ("header", "demo: right", "demo: wrong", "information", "teacher success")
    assert all(len(result[n]) == 2 for n in names)
    assert set(result["teacher success"]) <= {0.0, 1.0}
    # the plain learnable model (no teacher-context warm start) fails the gate: its block's presence costs ~3 nats
    assert any(f.startswith("block presence") for f in result["gate_failures"])
    for right, wrong, info in zip(result["demo: right"], result["demo: wrong"], result["information"], strict=True):
        assert info == pytest.approx(right - wrong)
    # a block changes the scores (an identical context gives exactly 0: test_sdpo_context_on_cpu.py)
    assert all(abs(v) > 1e-3 for v in result["header"])
    printed = capsys.readouterr().out
    assert "information" in printed and "gate: FAIL: block presence" in printed


def test_only_gate_turns_a_failed_gate_into_exit_1_with_a_canned_probe(monkeypatch, capsys):
    """The exit code's logic, with the probe's figures canned (the real probe runs above, once)."""
    import bench.sdpo_context as sdpo_context

    bad = {"header": [-3.4], "demo: right": [1.0], "demo: wrong": [0.9], "information": [0.1], "teacher success": [0.0]}
    monkeypatch.setattr(sdpo_context, "probe", lambda model, layouts, device: bad)
    assert main(["--model", "m", "--layouts", "1"]) == 0
    assert main(["--model", "m", "--layouts", "1", "--gate"]) == 1
    assert capsys.readouterr().out.count("gate: FAIL: block presence -3.40") == 2
