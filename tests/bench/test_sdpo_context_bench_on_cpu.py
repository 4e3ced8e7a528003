"""`python -m bench.sdpo_context` on the learnable tiny model and real click-test pages: every teacher context is
scored against the student on the same response, and `information` is demo right minus demo wrong, layout by
layout."""

import json

import pytest

from bench.sdpo_context import _far_corner, main


def test_far_corner_is_outside_the_target():
    box = (20.0, 60.0, 70.0, 90.0)  # task-area pixels, top-left quarter
    assert _far_corner(box, 1, (160, 210)) == (155, 205)
    x, y = _far_corner((100.0, 150.0, 150.0, 200.0), 1, (160, 210))
    assert (x, y) == (5, 55) and not (100 <= x < 150 and 150 <= y < 200)


def test_probe_on_two_layouts(chromium, tmp_path, capsys):
    out = tmp_path / "probe.json"
    assert main(["--layouts", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    names = ("header", "demo: right", "demo: wrong", "information")
    assert all(len(result[n]) == 2 for n in names)
    for right, wrong, info in zip(result["demo: right"], result["demo: wrong"], result["information"], strict=True):
        assert info == pytest.approx(right - wrong)
    # a block changes the scores (an identical context gives exactly 0: test_sdpo_context_on_cpu.py)
    assert all(abs(v) > 1e-3 for v in result["header"])
    assert "information" in capsys.readouterr().out
