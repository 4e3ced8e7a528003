"""Failures that are not the model's: a desktop that dies mid-episode (injected into a real MiniWoB browser) is
retried and counted apart; an endpoint that is down is an infra failure; a bad key stops the run in one line."""

import json
import time
from dataclasses import replace

import pytest

from verl_cua.cli import main
from verl_cua.envs import InfraFailure, make_env
from verl_cua.eval import ChatClient, EvalConfig, RunAborted, run_eval


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


def _closed_port_url() -> str:
    import socket

    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_an_endpoint_that_never_answers_stops_the_run_in_one_line_before_any_desktop(tmp_path, capsys):
    url = _closed_port_url()
    start = time.monotonic()
    rc = main(["eval", "--env", "miniwob", "--tasks", "click-test", "--model", "m", "--format", "pyautogui",
               "--base-url", url, "--endpoint-wait", "3", "--no-progress", "--out", str(tmp_path)])  # fmt: skip
    seconds = time.monotonic() - start
    err = capsys.readouterr().err.strip()
    assert rc == 3 and "\n" not in err and f"{url}/chat/completions does not answer" in err, err
    assert "ConnectError" in err and "--endpoint-wait" in err and "tries in 3 s" in err
    assert 2 <= seconds < 15  # retried for the bound, then stopped
    assert not list(tmp_path.rglob("result.json")) and not list(tmp_path.rglob("trajectory.jsonl"))


def test_an_endpoint_that_comes_up_within_the_bound_is_waited_for(tmp_path, chat_server):
    import threading

    url = _closed_port_url()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    started = []
    threading.Timer(1.5, lambda: started.append(chat_server({}, port=port))).start()
    ChatClient("openai", "m", base_url=url).wait_until_answers(10.0, interval=0.5)
    assert started, "returned before the server was up"


def test_endpoint_down_mid_run_is_an_infra_failure_and_is_rerun(tmp_path, chromium):
    url = _closed_port_url()
    client = ChatClient("openai", "scripted", base_url=url, retries=1, backoff=0.01)
    config = _config(tmp_path, url, retries=1, endpoint_wait=0)  # 0: no check at start, as if it died after it
    summary = run_eval(config, client=client)
    result = json.loads((tmp_path / "click-test" / "seed-1" / "result.json").read_text())
    assert result["status"] == "infra_failure" and result["end_reason"] == "endpoint" and result["attempts"] == 2
    assert "ConnectError" in result["error"]
    assert (summary["scored"], summary["infra_failures"], summary["success_rate"]) == (0, 2, None)
    assert summary["success_rate_osworld"] == 0.0 and summary["success_rate_ci95"] is None  # OSWorld counts them
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


def test_settings_mistakes_are_one_line_errors_not_infra_failures(tmp_path, capsys, chromium, chat_server):
    url = chat_server({}).url  # an endpoint that answers: the env's settings are checked next
    base = ["eval", "--model", "m", "--format", "pyautogui", "--no-progress", "--out", str(tmp_path), "--base-url", url]
    assert main([*base, "--env", "osworld", "--provider", "dockr", "--tasks", "term-create-file"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown --provider 'dockr'; valid: local, docker" in err and "\n" not in err
    assert main([*base, "--env", "miniwob", "--tasks", "click-test", "--env-kwargs", '{"bogus": 1}']) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("verl-cua eval: cannot make the miniwob env: TypeError") and "bogus" in err
    assert main([*base, "--env", "miniwob", "--tasks", "click-test", "--max-pixels", "100000"]) == 2
    assert "--max-pixels does not apply to --format pyautogui" in capsys.readouterr().err
    assert not list(tmp_path.rglob("result.json"))


def test_a_mistyped_model_does_not_lock_the_run_directory(tmp_path, chat_server, chromium):
    down = chat_server({}, status=404)
    with pytest.raises(RunAborted, match="HTTP 404.*--model"):
        run_eval(_config(tmp_path, down.url))
    good = chat_server({"Click": ["DONE"]})
    fixed = EvalConfig(**{**_config(tmp_path, good.url).__dict__, "model": "the-right-name"})
    assert run_eval(fixed)["scored"] == 2  # no episode had finished: the settings were not binding yet
    with pytest.raises(ValueError, match="model='the-right-name', not 'scripted'"):
        run_eval(_config(tmp_path, good.url))  # now they are


def test_two_evals_cannot_share_a_run_directory(tmp_path, chat_server):
    import fcntl

    tmp_path.mkdir(exist_ok=True)
    with open(tmp_path / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="another verl-cua eval is writing to"):
            run_eval(_config(tmp_path, "http://127.0.0.1:9/v1"), env_factory=lambda: None)


def test_the_cli_exits_4_while_infra_failures_are_left(tmp_path, capsys, monkeypatch):
    summary = {"infra_failures": 2, "domains": {}, "tasks": 2, "scored": 0, "successes": 0, "success_rate": None,
               "success_rate_ci95": None,
               "unfinished": 0, "invalid_action_rate": None, "mean_steps": None, "mean_step_latency_s": None,
               "prompt_tokens": 0, "completion_tokens": 0}  # fmt: skip
    monkeypatch.setattr("verl_cua.eval.run_eval", lambda config, progress: summary)
    rc = main(["eval", "--env", "miniwob", "--tasks", "click-test", "--model", "m", "--format", "pyautogui",
               "--out", str(tmp_path)])  # fmt: skip
    assert rc == 4 and "2 tasks ended in infra failures; rerun to retry them" in capsys.readouterr().err


def test_a_missing_env_package_names_the_install_command(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "miniwob", None)  # as if not installed
    rc = main(["eval", "--env", "miniwob", "--tasks", "click-test", "--model", "m", "--format", "qwen3vl",
               "--out", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert (
        rc == 2 and err == "verl-cua eval: the miniwob env needs the miniwob package: pip install 'verl-cua[miniwob]'"
    )


def test_providers_come_from_the_envs_spec(scratch_env):
    """`--provider` is checked against, defaulted from and passed to the env by what its `EnvSpec` says, for an env
    registered by a user as for OSWorld."""
    from verl_cua.envs import EnvSpec
    from verl_cua.eval.runner import EvalConfig, _check, _env_kwargs

    name = scratch_env("farm", EnvSpec(provider="rack", providers=("rack", "cloud"), reset_timeout=42.0))
    config = EvalConfig(env=name, tasks="t", model="m", format="pyautogui", out="o")
    with pytest.raises(ValueError, match=r"^unknown --provider 'moon'; valid: rack, cloud$"):
        _check(replace(config, provider="moon"))
    _check(replace(config, provider="cloud"))
    assert _env_kwargs(replace(config, provider="cloud")) == {"provider": "cloud"}
    with pytest.raises(ValueError, match=r"^--provider is for --env farm or osworld; miniwob takes none$"):
        _check(replace(config, env="miniwob", provider="rack"))
    assert _env_kwargs(replace(config, env="miniwob")) == {}
