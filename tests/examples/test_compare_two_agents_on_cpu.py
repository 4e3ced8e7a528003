"""examples/compare_two_agents.py end to end on real MiniWoB++: two scripted agents (OpenAI and Anthropic APIs), the
summaries, the comparison and the report."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_example_runs_both_agents_compares_and_writes_the_report(tmp_path, chromium):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "compare_two_agents.py"), "--episodes", "3", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    qwen = json.loads((tmp_path / "qwen3vl-8b" / "summary.json").read_text())
    claude = json.loads((tmp_path / "claude-sonnet-4.5" / "summary.json").read_text())
    assert (qwen["successes"], qwen["scored"]) == (2, 3)  # misses the last episode
    assert (claude["successes"], claude["scored"]) == (2, 3)  # misses the second
    assert "2 of 3 tasks differ: qwen3vl-8b better on 1, claude-sonnet-4.5 better on 1" in proc.stdout
    report = (tmp_path / "report.html").read_text()
    assert report.count('class="task-row"') == 3 and "claude-sonnet-4.5" in report
