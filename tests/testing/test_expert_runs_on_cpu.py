"""The MiniWoB oracle played through the real eval harness (real Chromium): every episode an ordinary eval episode
directory, two envs in parallel each answered from its own page, noise that fails episodes, runs that resume."""

import json
import threading

import pytest

from verl_cua.testing.expert_runs import MODEL, OracleClient, expert_runs, main


class MeetingOracle(OracleClient):
    """Holds the first turns of the first two episodes until both are asked at once: proof that two envs play in
    parallel and that each reply still comes from its own env's page."""

    def __init__(self, meet: int = 2):
        super().__init__()
        self.meet = meet
        self.barrier = threading.Barrier(2, timeout=30)
        self.first_turns = 0
        self.calls = 0
        self._count = threading.Lock()

    def complete(self, spec, turns, history_images):
        with self._count:
            self.calls += 1
            meet = len(turns) == 1 and self.first_turns < self.meet
            self.first_turns += meet
        if meet:
            self.barrier.wait()
        return super().complete(spec, turns, history_images)


def _lines(episode_dir):
    return [json.loads(line) for line in (episode_dir / "trajectory.jsonl").read_text().splitlines()]


def test_two_workers_solve_every_episode_and_a_rerun_replays_nothing(tmp_path, chromium):
    oracle = MeetingOracle()
    summary = expert_runs(tmp_path, ["click-test@0-3", "enter-text@0-1"], workers=2, client=oracle)
    assert (summary["tasks"], summary["successes"], summary["infra_failures"]) == (6, 6, 0)
    assert oracle.first_turns == 2 and oracle.barrier.n_waiting == 0 and not oracle.barrier.broken
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["model"] == MODEL and run["format"] == "pyautogui" and run["workers"] == 2
    for key in ["click-test/seed-0", "enter-text/seed-1"]:
        result = json.loads((tmp_path / key / "result.json").read_text())
        assert result["status"] == "success" and result["model"] == MODEL
        lines = _lines(tmp_path / key)
        assert all(line["valid"] and line["response"] == {"model": MODEL, "wrong": False} for line in lines)
        kinds = [[a["kind"] for a in line["action"]["actions"]] for line in lines]
        assert kinds == ([["click"]] if key.startswith("click") else [["click"], ["type"], ["click"]])
        assert "pyautogui.click(" in lines[0]["model_text"]
        assert all((tmp_path / key / line["screenshot"]).stat().st_size > 0 for line in lines)
    typed = _lines(tmp_path / "enter-text/seed-1")[1]
    assert typed["model_text"] == f"```python\npyautogui.write({typed['action']['actions'][0]['text']!r})\n```"

    again = MeetingOracle(meet=0)
    assert expert_runs(tmp_path, ["click-test@0-3", "enter-text@0-1"], workers=2, client=again)["successes"] == 6
    assert again.calls == 0  # finished tasks are not played again
    assert expert_runs(tmp_path, ["click-test@0-4"], client=again)["tasks"] == 7 and again.calls == 1


def test_full_noise_fails_every_click_test_episode_from_the_cli(tmp_path, capsys, chromium):
    rc = main([str(tmp_path), "--tasks", "click-test", "--seeds", "0-2", "--noise", "1.0"])
    assert rc == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"success rate 0.000 (0/3 scored), 3 episodes, 0 infra failures, out {tmp_path}"]
    for seed in range(3):
        result = json.loads((tmp_path / f"click-test/seed-{seed}/result.json").read_text())
        assert result["status"] == "failure" and result["end_reason"] == "done"  # a miss, then DONE
        assert [line["response"]["wrong"] for line in _lines(tmp_path / f"click-test/seed-{seed}")] == [True, True]


def test_noise_is_deterministic_per_task_seed_and_episode():
    a, b, other = OracleClient(noise=0.3, seed=1), OracleClient(noise=0.3, seed=1), OracleClient(noise=0.3, seed=2)
    picks = [a.is_wrong("click-test", episode) for episode in range(200)]
    assert picks == [b.is_wrong("click-test", episode) for episode in range(200)]
    assert picks != [other.is_wrong("click-test", episode) for episode in range(200)]
    assert picks != [a.is_wrong("enter-text", episode) for episode in range(200)]
    assert 40 < sum(picks) < 80
    assert not any(OracleClient().is_wrong("click-test", e) for e in range(50))
    assert all(OracleClient(noise=1.0).is_wrong("click-test", e) for e in range(50))


def test_unsupported_tasks_are_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match=r"cannot play login-user; supported: click-button, click-test, ") as exc:
        expert_runs(tmp_path, "click-test,login-user")
    assert "\n" not in str(exc.value) and not (tmp_path / "run.json").exists()
    with pytest.raises(ValueError, match="noise must be a fraction"):
        OracleClient(noise=1.5)
