"""Failures that are not the model's: a desktop that dies mid-episode (injected into a real MiniWoB browser) is
retried and counted apart; an endpoint that is down is an infra failure; a bad key stops the run in one line."""

import json

from verl_cua.cli import main
from verl_cua.envs import InfraFailure, make_env
from verl_cua.eval import ChatClient, EvalConfig, run_eval


class DiesOnFirstStep:
    """A real MiniWoB env whose very first step fails as a dead browser would (the failure is injected)."""

    steps = 0

    def __init__(self):
        self.env = make_env("miniwob", action_format="pyautogui")

    def reset(self, task):
        return self.env.reset(task)

    def step(self, action, *, format=None):
        DiesOnFirstStep.steps += 1
        if DiesOnFirstStep.steps == 1:
            raise InfraFailure("browser died (injected)")
        return self.env.step(action, format=format)

    def evaluate(self):
        return self.env.evaluate()

    def pids(self):
        return self.env.pids()

    def close(self):
        self.env.close()


def _config(out, url, **kwargs):
    return EvalConfig(env="miniwob", tasks="click-test", seeds="0-1", model="scripted", format="pyautogui",
                      out=str(out), base_url=url, max_steps=3, **kwargs)  # fmt: skip


def test_infra_failure_is_retried_and_not_counted_as_a_model_failure(tmp_path, chat_server, chromium):
    server = chat_server({"Click": ["```python\npyautogui.click(5, 5)\n```", "DONE"]})
    summary = run_eval(_config(tmp_path, server.url, retries=2), env_factory=DiesOnFirstStep)
    first = json.loads((tmp_path / "click-test" / "seed-0" / "result.json").read_text())
    assert first["attempts"] == 2 and first["status"] == "failure"  # a corner click misses the button: the model's
    assert first["end_reason"] == "done" and first["steps"] == 2
    lines = (tmp_path / "click-test" / "seed-0" / "trajectory.jsonl").read_text().splitlines()
    assert len(lines) == 2 and not any(json.loads(line)["infra_failure"] for line in lines)  # attempt 1 replaced
    assert (summary["scored"], summary["infra_failures"], summary["retried"]) == (2, 0, 1)
    assert summary["success_rate"] == 0.0


def test_endpoint_down_is_an_infra_failure_and_is_rerun(tmp_path, chromium):
    import socket

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    client = ChatClient("openai", "scripted", base_url=url, retries=1, backoff=0.01)
    config = _config(tmp_path, url, retries=1)
    summary = run_eval(config, client=client)
    result = json.loads((tmp_path / "click-test" / "seed-1" / "result.json").read_text())
    assert result["status"] == "infra_failure" and result["end_reason"] == "endpoint" and result["attempts"] == 2
    assert "ConnectError" in result["error"]
    assert (summary["scored"], summary["infra_failures"], summary["success_rate"]) == (0, 2, None)
    calls = []

    class Counting(ChatClient):
        def complete(self, *args, **kwargs):
            calls.append(1)
            return super().complete(*args, **kwargs)

    run_eval(config, client=Counting("openai", "scripted", base_url=url, retries=0))
    assert len(calls) == 2 * 2  # infra-failed tasks are not finished: both run again, each tried twice


def test_bad_api_key_stops_the_run_in_one_line(tmp_path, chat_server, capsys, chromium):
    server = chat_server({}, status=401)
    rc = main(["eval", "--env", "miniwob", "--tasks", "click-test", "--seeds", "0-3", "--model", "m",
               "--format", "pyautogui", "--base-url", server.url, "--workers", "2", "--no-progress",
               "--out", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 3 and "HTTP 401" in err and "--api-key-env" in err and "\n" not in err
    assert len(server.requests) <= 2  # no task started after the refusal
    assert not list(tmp_path.rglob("result.json"))


def test_unknown_task_and_claude_without_anthropic_fail_in_one_line(tmp_path, capsys, chromium):
    rc = main(["eval", "--env", "miniwob", "--tasks", "no-such-task", "--model", "m", "--format", "pyautogui",
               "--out", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("verl-cua eval: unknown MiniWoB task(s) no-such-task; e.g.") and "\n" not in err
    rc = main(["eval", "--env", "miniwob", "--tasks", "click-test", "--model", "m", "--format", "claude",
               "--out", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--provider-api anthropic" in err
