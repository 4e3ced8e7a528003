"""A MiniWoB++ eval ends quietly: the pool closes its browsers before anything kills them, so selenium's quit finds
its chromedriver alive (killed first, the quit's DELETE /session got 'Connection reset' and urllib3 retried 3 times)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_miniwob_eval_run_ends_without_connection_warnings(tmp_path, chat_server, chromium):
    server = chat_server({"Click": ["```python\npyautogui.click(5, 5)\n```", "DONE"]})
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "verl_cua.cli", "eval", "--env", "miniwob", "--tasks", "click-test", "--seeds", "0-1",
         "--model", "scripted", "--format", "pyautogui", "--base-url", server.url, "--max-steps", "3",
         "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scored"] == 2 and summary["infra_failures"] == 0  # both episodes ran in a real browser
    for noise in ("Connection reset", "Retrying", "WARNING"):
        assert noise not in proc.stderr, proc.stderr
