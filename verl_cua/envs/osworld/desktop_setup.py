"""What a task's setup did on the local desktop: failed steps, and whether the apps it launched are up.

Runs inside the desktop next to desktop_server.py (imports nothing from verl-cua). OSWorld's SetupController only
logs a failed step, so a task whose app is missing would start on an empty screen. The server notes every setup
call that failed (an error answer, a command the shell could not find) and every app it launched since the last
revert; `settle()` then waits, bounded, until each launched app that is still running shows a window, and reports
the failures, apps that exited with an error, and apps still without a window when time ran out.
"""

from __future__ import annotations

import os
import threading
import time

NOT_FOUND = (126, 127)  # the shell's "not executable" and "command not found"
QUIET_EXIT = frozenset({"pkill", "killall", "pgrep", "kill", "true", "false", "sleep", "xdotool", "wmctrl"})
GUI_GRACE = 3.0  # seconds a launched process may take to load an X library before it counts as windowless
MAX_EXITS = 4096  # exit statuses kept per episode (every process the launcher reaped since the revert)


class SetupTracker:
    """Failed setup calls and launched apps since the last revert (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.failures: list[str] = []
        # pids of the apps launched (by the desktop's launcher, which reaps them and reports their exit status)
        self.launched: list[tuple[int, str, float]] = []
        self.exit_codes: dict[int, int] = {}

    def clear(self) -> None:
        """Forget the episode."""
        with self._lock:
            self.failures, self.launched, self.exit_codes = [], [], {}

    def exited(self, pid: int, code: int) -> None:
        """The launcher reaped `pid` with exit status `code`: kept for any pid, since an app that fails at once can
        exit before `launch` notes its pid (the spawn's reply and the exit come on different threads). A pid comes
        back only after the kernel's pids wrap at pid_max, so within an episode (`clear` at each revert) an exited
        pid is almost never a later app's; the oldest go past `MAX_EXITS`."""
        with self._lock:
            self.exit_codes[pid] = code
            while len(self.exit_codes) > MAX_EXITS:
                del self.exit_codes[next(iter(self.exit_codes))]

    def failed(self, message: str) -> None:
        """Note one failed setup call."""
        with self._lock:
            self.failures.append(message[:300])

    def executed(self, command, result: dict) -> None:
        """Note a setup command the shell could not run (missing program)."""
        if result.get("returncode") in NOT_FOUND:
            error = (result.get("error") or "").strip().splitlines()
            self.failed(f"execute {_name(command)}: {error[-1] if error else 'command not found'}")

    def launch(self, pid: int, command) -> None:
        """Note an app the setup launched."""
        with self._lock:
            self.launched.append((pid, _name(command), time.monotonic()))

    def settle(self, windows_of, descendants, maps_x, timeout: float) -> dict:
        """Wait until every running launched app shows a window (at most `timeout` s); what went wrong.
        `maps_x(pids)`: which of them are X clients (the launcher reads that, as their user)."""
        start = time.monotonic()
        while True:
            with self._lock:
                launched = list(self.launched)
                failures = list(self.failures)
                codes = dict(self.exit_codes)
            window_pids = windows_of()
            pending = []
            for pid, name, since in launched:
                code = codes.get(pid)
                if code is not None or not os.path.exists(f"/proc/{pid}"):
                    if code not in (0, None) and name not in QUIET_EXIT:
                        failures.append(f"launch {name}: exited with status {code}")
                    continue
                tree = {pid, *descendants(pid)}
                if tree & window_pids:
                    continue
                if maps_x(sorted(tree)) or time.monotonic() - since < GUI_GRACE:
                    pending.append(name)
            if not pending or time.monotonic() - start >= timeout:
                break
            time.sleep(0.1)
        return {"failures": failures, "pending": pending, "waited_s": round(time.monotonic() - start, 2)}


def _name(command) -> str:
    """The program a command runs (its first word), for messages."""
    words = command.split() if isinstance(command, str) else [str(c) for c in command or []]
    return os.path.basename(words[0]) if words else "?"
