"""recipes/lib/stages.sh, the quickstart's stage lines: each stage announced and ended with its time, a line every
TICK_S seconds while a long command runs, and a Ctrl-C (SIGINT to the whole process group, as a terminal sends it)
answered by one line naming the stage and what was kept, exit 130, with the ticker gone."""

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """set -xeuo pipefail
source {lib}
STAGES_OF=demo
STAGES_TOTAL=2
stages_kept() {{ echo "the first stage's output"; }}
stages_traps
stage "first"
stage_note "a note"
stage "second: a long command"
ticking "sleeping" sleep {sleep}
{fail}
stage_end
"""


def _run(tmp_path: Path, sleep: float, stop_after: float | None = None, fail: str = "") -> tuple[int, str]:
    script = tmp_path / "demo.sh"
    script.write_text(SCRIPT.format(lib=ROOT / "recipes" / "lib" / "stages.sh", sleep=sleep, fail=fail))
    proc = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "TICK_S": "1"}, start_new_session=True)  # fmt: skip
    if stop_after is not None:
        time.sleep(stop_after)
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_stages_say_their_time_and_a_long_command_ticks(tmp_path):
    rc, out = _run(tmp_path, sleep=2.5)
    ours = [line for line in out.splitlines() if line.startswith("demo:")]
    assert rc == 0, out
    assert ours[:3] == ["demo: [1/2] first", "demo: [1/2] a note", "demo: [1/2] done in 0 s"]
    assert ours[3] == "demo: [2/2] second: a long command"
    ticks = [line for line in ours if "sleeping:" in line]
    assert 1 <= len(ticks) <= 3 and ticks[0] == "demo: [2/2] sleeping: 1 s so far", ours
    assert ours[-1].startswith("demo: [2/2] done in ")


def test_ctrl_c_is_one_line_naming_the_stage_and_what_was_kept(tmp_path):
    rc, out = _run(tmp_path, sleep=30, stop_after=2.5)
    assert rc == 130, out
    stopped = [line for line in out.splitlines() if "stopped" in line and not line.startswith("+")]  # not set -x
    assert stopped == [
        "demo: stopped (Ctrl-C) at [2/2] second: a long command; kept: the first stage's output; "
        "run the same command again to go on from there"
    ], out
    assert "Traceback" not in out
    time.sleep(1.5)  # a ticker left behind would still print
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "demo.sh")], capture_output=True).returncode == 1


def test_a_failing_stage_keeps_its_exit_status(tmp_path):
    """The EXIT trap must not turn a failure into success (its own `set +x` would reset `$?`)."""
    assert _run(tmp_path, sleep=0, fail="false")[0] == 1
    rc, out = _run(tmp_path, sleep=0, fail="exit 3")
    assert rc == 3 and not [line for line in out.splitlines() if line.startswith("demo: stopped")]
