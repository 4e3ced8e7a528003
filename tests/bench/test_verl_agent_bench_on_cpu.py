"""The verl-agent manager benchmark steps real MiniWoB envs through the manager and bare, and reports both."""

import json

from bench.verl_agent import main


def test_verl_agent_bench_reports_manager_and_bare_step_times(chromium, capsys):
    assert main(["--steps", "3", "--rounds", "1"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["manager_ms"] > 0 and figures["bare_ms"] > 0
    assert 0.2 < figures["ratio"] < 5
