"""The local desktop's setup tracker: an app that fails at once is reported even when its exit arrives before its
launch is noted (the launcher's exit event and the spawn's reply come on different threads)."""

import subprocess

from verl_cua.envs.osworld.desktop_setup import MAX_EXITS, SetupTracker


def _exited_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid  # gone from /proc: only its reported exit status says how it ended


def _settle(tracker: SetupTracker) -> dict:
    return tracker.settle(windows_of=set, descendants=lambda pid: [], maps_x=lambda pids: False, timeout=0.5)


def test_an_exit_reported_before_the_launch_is_noted_still_fails_the_setup():
    tracker, pid = SetupTracker(), _exited_pid()
    tracker.exited(pid, 127)  # the launcher reaped it first
    tracker.launch(pid, "no-such-app --x")
    assert _settle(tracker)["failures"] == ["launch no-such-app: exited with status 127"]


def test_a_clean_exit_and_a_revert_leave_no_failure():
    tracker, pid = SetupTracker(), _exited_pid()
    tracker.launch(pid, ["some-daemon"])
    tracker.exited(pid, 0)
    assert _settle(tracker)["failures"] == []
    tracker.exited(pid, 1)
    tracker.clear()  # a revert forgets the episode
    tracker.launch(pid, ["some-daemon"])
    assert _settle(tracker)["failures"] == []


def test_exit_statuses_are_bounded():
    tracker = SetupTracker()
    for pid in range(MAX_EXITS + 10):
        tracker.exited(pid, 1)
    assert len(tracker.exit_codes) == MAX_EXITS and 0 not in tracker.exit_codes
