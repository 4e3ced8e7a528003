"""Smoke test of examples/parse_outputs.py: every format parses and the hostile one is rejected."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_example_parses_every_format_and_rejects_the_injection():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "parse_outputs.py"), "--screen", "1920x1080"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for fmt in ("qwen3vl", "qwen25vl", "uitars", "pyautogui", "claude"):
        assert f"== {fmt}" in out
    assert "pyautogui: pyautogui.click(48, 13)" in out  # qwen3vl (25, 12) of 1000 on 1920x1080
    assert "pyautogui: pyautogui.hotkey('ctrl', 's')" in out
    assert "rejected: import of 'os' is not allowed" in out
